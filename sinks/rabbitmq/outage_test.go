package rabbitmq_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A broker that is unreachable when the relay starts, and again mid-run (a
// proxy in front of it refuses and cuts connections), only delays
// delivery: messages wait in the outbox, reach the queue once it is back,
// and none is dead-lettered. (Mutation: a failed dial in sinks.Connection
// made permanent fails this test; so does sinks.Connection never
// redialing a connection that broke mid-run, which dead-letters rows once
// the retry budget is spent.)
func TestBrokerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	proxy := brokertest.NewProxy(t, addr)
	proxy.Down()
	tg := target(proxy.Addr(), q)
	tg.Options["connect_timeout"] = "1s"
	brokertest.Outage(t, tg, "orders", proxy.Down, proxy.Up)
}

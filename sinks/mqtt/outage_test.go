package mqtt_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A broker that is unreachable when the relay starts, and again mid-run (a
// proxy in front of it refuses and cuts connections), only delays
// delivery: messages wait in the outbox, reach the subscriber once it is
// back, and none is dead-lettered.
// Mutation: an IsClosed that always says false (the broken connection is
// never redialed) fails it.
func TestBrokerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	proxy := brokertest.NewProxy(t, addr)
	proxy.Down()
	tg := sub.target("tcp://"+proxy.Addr(), "events", "events")
	tg.Options["connect_timeout"], tg.Options["timeout"] = "1s", "2s"
	brokertest.Outage(t, tg, "events", proxy.Down, proxy.Up)
}

package pubsub_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A Pub/Sub that is unreachable when the relay starts, and again mid-run
// (a proxy in front of the fake refuses and cuts connections), only
// delays delivery: messages wait in the outbox, reach the subscription
// once it is back, and none is dead-lettered.
// Mutation: classifying UNAVAILABLE as permanent fails it (rows
// dead-lettered while the proxy is down).
func TestPubSubDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	sub := f.topic(t, "events")
	proxy := brokertest.NewProxy(t, f.srv.Addr)
	proxy.Down()
	tg := sub.target()
	tg.Options["endpoint"] = proxy.Addr()
	tg.Options["connect_timeout"], tg.Options["timeout"] = "1s", "2s"
	brokertest.Outage(t, tg, "events", proxy.Down, proxy.Up)
}

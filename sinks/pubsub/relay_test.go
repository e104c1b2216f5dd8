package pubsub_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayPublishesToTheTopic enqueues traced messages into the real
// outbox, relays them through the pubsub sink and receives them from a
// subscription of the fake: each message is there once, under its delivery
// id attribute, with the enqueued payload, the row's own header and a
// traceparent whose parent is the relay's delivery span in the producer's
// trace.
// Mutation: publishing without sinks.MessageHeaders' attributes fails it
// (no traceparent, no x-tenant).
func TestRelayPublishesToTheTopic(t *testing.T) {
	t.Parallel()
	brokertest.EndToEnd(t, newFake(t).topic(t, "events").target(), "events")
}

// TestRelayKeepsEachOrderingKeyInOrder relays messages of interleaved
// ordering keys; the ordered subscription receives each key's messages in
// order.
func TestRelayKeepsEachOrderingKeyInOrder(t *testing.T) {
	t.Parallel()
	brokertest.Ordered(t, newFake(t).topic(t, "orders").target(), "orders")
}

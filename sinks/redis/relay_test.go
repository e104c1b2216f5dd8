package redis_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayAddsToTheStream enqueues traced messages into the real outbox,
// relays them through the redis sink and reads the stream: each message is
// there once, under its delivery id, with the enqueued payload, the row's
// own header and a traceparent whose parent is the relay's delivery span
// in the producer's trace.
// Mutation: leaving the headers field out of the entry fails it (no
// traceparent, no x-tenant).
func TestRelayAddsToTheStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	brokertest.EndToEnd(t, sp.target(url, "{{.Sink}}", "events"), "events")
}

// TestOrderingKeyArrivesInOrderOnItsStream adds messages of interleaved
// ordering keys to a stream per key; each stream holds its key's messages
// in order.
func TestOrderingKeyArrivesInOrderOnItsStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	brokertest.Ordered(t, sp.target(url, "{{.OrderingKey}}", "customer-a", "customer-b", "customer-c", "customer-d"), "orders")
}

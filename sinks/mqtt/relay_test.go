package mqtt_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayPublishesToTheBroker enqueues traced messages into the real
// outbox, relays them through the mqtt sink and reads what a subscriber
// received: each message once, under its delivery id, with the enqueued
// payload, the row's own header and a traceparent whose parent is the
// relay's delivery span in the producer's trace.
// Mutation: leaving Headers out of the envelope fails it (no traceparent,
// no x-tenant).
func TestRelayPublishesToTheBroker(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	brokertest.EndToEnd(t, sub.target("tcp://"+addr, "{{.Sink}}", "events"), "events")
}

// TestOrderingKeyArrivesInOrderOnItsTopic publishes messages of
// interleaved ordering keys on a topic per key; each topic's messages
// arrive in order.
func TestOrderingKeyArrivesInOrderOnItsTopic(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	brokertest.Ordered(t, sub.target("tcp://"+addr, "{{.OrderingKey}}", "customer-a", "customer-b", "customer-c", "customer-d"), "orders")
}

package rabbitmq_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayPublishesToRabbitMQ enqueues traced messages into the real
// outbox, relays them through the rabbitmq sink and reads the queue: each
// message is there once, persistent, with the routing key its template
// gives, under message-id = its dedup key, with the enqueued payload, the
// row's own header and a traceparent whose parent is the relay's delivery
// span in the producer's trace.
func TestRelayPublishesToRabbitMQ(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	tg := target(addr, newQueue(t, addr))
	tg.Check = func(t testing.TB, r brokertest.Received) {
		if r.Dest != "events.orders" {
			t.Errorf("%s: routing key %s, want events.orders", r.ID, r.Dest)
		}
	}
	brokertest.EndToEnd(t, tg, "orders")
}

package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// deliverTimeout bounds the wait for a test's messages to be sent.
const deliverTimeout = time.Minute

// TestRelayPublishesToRabbitMQ enqueues traced messages into the real
// outbox, relays them through the rabbitmq sink and reads the queue: each
// message is there once, persistent, under message-id = its dedup key,
// with the enqueued payload, the row's own header and a traceparent whose
// parent is the relay's delivery span in the producer's trace.
func TestRelayPublishesToRabbitMQ(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	pool, ob := testdb.New(t)
	tracing := brokertest.NewTracing(t)
	sink := build(t, "orders", map[string]any{"url": brokerURL(addr), "exchange": q.exchange, "routing_key": "events.{{.Sink}}"})
	brokertest.Relay(t, pool, ob, tracing, core.SinkConfig{Name: "orders", Type: rabbitmq.Type, Sink: sink})

	msgs := brokertest.Messages("orders", "e2e", 30)
	producer := tracing.Enqueue(t, pool, ob, msgs)
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(msgs)), deliverTimeout)

	got := q.messages(t)
	brokertest.CheckDelivered(t, msgs, got, true)
	for _, r := range got {
		if r.Dest != "events.orders" {
			t.Errorf("%s: routing key %s, want events.orders", r.ID, r.Dest)
		}
		tracing.CheckTraceContext(t, "orders", producer, r)
	}
}

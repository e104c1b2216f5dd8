package rabbitmq_test

import (
	"testing"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/sinks/rabbitmq"
)

// A relay SIGKILLed mid-publish leaves confirmed messages whose rows are
// still in progress; the relay that takes them over publishes them again.
// RabbitMQ does not deduplicate, so the queue holds every message at least
// once, and each copy carries the same message-id (the dedup key) and
// payload, so a consumer can drop the second.
func TestRelayKilledMidPublishDeliversAtLeastOnceUnderOneMessageID(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	pool, ob := testdb.New(t)
	options := map[string]any{"url": brokerURL(addr), "exchange": q.exchange, "routing_key": "events.x"}
	msgs := brokertest.Messages("orders", "crash", 300)
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}

	brokertest.Crash(t, ob, rabbitmq.Type, "orders", options, 100, "TestCrashChild")
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "orders", Sink: build(t, "orders", options)})
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(msgs)), deliverTimeout)

	duplicates := brokertest.CheckDelivered(t, msgs, q.messages(t), false)
	if duplicates == 0 {
		t.Error("no message arrived twice: the crash left no confirmed message unrecorded")
	}
	t.Logf("%d duplicates, each under its original message-id", duplicates)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

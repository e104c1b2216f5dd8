package nats_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// deliverTimeout bounds the wait for a test's messages to be sent.
const deliverTimeout = time.Minute

// TestRelayPublishesToJetStream enqueues traced messages into the real
// outbox, relays them through the nats sink and reads the stream: each
// message is there once, under Nats-Msg-Id = its dedup key, with the
// enqueued payload, the row's own header and a traceparent whose parent is
// the relay's delivery span in the producer's trace.
func TestRelayPublishesToJetStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	pool, ob := testdb.New(t)
	tracing := brokertest.NewTracing(t)
	sink := build(t, "events", map[string]any{"url": url, "subject": st.name + ".{{.Sink}}"})
	brokertest.Relay(t, pool, ob, tracing, core.SinkConfig{Name: "events", Type: natssink.Type, Sink: sink})

	msgs := brokertest.Messages("events", "e2e", 30)
	producer := tracing.Enqueue(t, pool, ob, msgs)
	brokertest.WaitSent(t, pool, ob, "events", int64(len(msgs)), deliverTimeout)

	got := st.messages(t)
	brokertest.CheckDelivered(t, msgs, got, true)
	for _, r := range got {
		if r.Dest != st.name+".events" {
			t.Errorf("%s: subject %s, want %s.events", r.ID, r.Dest, st.name)
		}
		tracing.CheckTraceContext(t, "events", producer, r)
	}
}

// TestOrderingKeyArrivesInOrderOnItsSubject publishes messages of three
// interleaved ordering keys on a subject per key; each subject holds its
// key's messages in order.
func TestOrderingKeyArrivesInOrderOnItsSubject(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	pool, ob := testdb.New(t)
	sink := build(t, "orders", map[string]any{"url": url, "subject": st.name + ".{{.OrderingKey}}"})
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "orders", Sink: sink})

	msgs := brokertest.Messages("orders", "ord", 60, "customer-a", "customer-b", "customer-c")
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(msgs)), deliverTimeout)
	got := st.messages(t)
	brokertest.CheckDelivered(t, msgs, got, true)
	brokertest.CheckOrder(t, got)
}

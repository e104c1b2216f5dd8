package kafka_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/sinks/kafka"
)

// deliverTimeout bounds the wait for a test's messages to be sent.
const deliverTimeout = time.Minute

// TestRelayProducesToKafka enqueues traced messages into the real outbox,
// relays them through the kafka sink into kfake and reads the topic: each
// message is there once, keyed by its dedup key, with the dedup key
// header, the enqueued payload, the row's own header and a traceparent
// whose parent is the relay's delivery span in the producer's trace.
func TestRelayProducesToKafka(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	pool, ob := testdb.New(t)
	tracing := brokertest.NewTracing(t)
	sink := build(t, "events", map[string]any{"brokers": brokerList(cluster), "topic": testTopic})
	brokertest.Relay(t, pool, ob, tracing, core.SinkConfig{Name: "events", Type: kafka.Type, Sink: sink})

	msgs := brokertest.Messages("events", "e2e", 30)
	producer := tracing.Enqueue(t, pool, ob, msgs)
	brokertest.WaitSent(t, pool, ob, "events", int64(len(msgs)), deliverTimeout)

	got := records(t, cluster.ListenAddrs())
	brokertest.CheckDelivered(t, msgs, got, true)
	for _, r := range got {
		if r.Key != r.ID {
			t.Errorf("%s: record key %q, want the dedup key", r.ID, r.Key)
		}
		tracing.CheckTraceContext(t, "events", producer, r)
	}
}

// TestOrderingKeyKeepsItsPartitionInOrder produces messages of interleaved
// ordering keys: each key's records share one partition, in order.
func TestOrderingKeyKeepsItsPartitionInOrder(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	pool, ob := testdb.New(t)
	sink := build(t, "orders", map[string]any{"brokers": brokerList(cluster), "topic": testTopic})
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "orders", Sink: sink})

	msgs := brokertest.Messages("orders", "ord", 80, "customer-a", "customer-b", "customer-c", "customer-d")
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitSent(t, pool, ob, "orders", int64(len(msgs)), deliverTimeout)
	got := records(t, cluster.ListenAddrs())
	brokertest.CheckDelivered(t, msgs, got, true)
	brokertest.CheckOrder(t, got)
	for _, r := range got {
		var p brokertest.Payload
		if err := json.Unmarshal(r.Payload, &p); err != nil || p.Key != r.Key {
			t.Errorf("%s: record key %q, want the ordering key of %s", r.ID, r.Key, r.Payload)
		}
	}
}

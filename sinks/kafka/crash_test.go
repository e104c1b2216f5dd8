package kafka_test

import (
	"testing"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/sinks/kafka"
)

// A relay SIGKILLed mid-produce leaves acknowledged records whose rows are
// still in progress; the relay that takes them over produces them again
// (a new producer id, so the idempotent producer cannot drop them). The
// topic holds every message at least once, and each copy carries the same
// dedup key header, record key and payload, so a consumer can drop the
// second.
func TestRelayKilledMidProduceDeliversAtLeastOnceUnderOneDedupKey(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	pool, ob := testdb.New(t)
	options := map[string]any{"brokers": brokerList(cluster), "topic": testTopic}
	msgs := brokertest.Messages("events", "crash", 300)
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}

	brokertest.Crash(t, ob, kafka.Type, "events", options, 100, "TestCrashChild")
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "events", Sink: build(t, "events", options)})
	brokertest.WaitSent(t, pool, ob, "events", int64(len(msgs)), deliverTimeout)

	got := records(t, cluster.ListenAddrs())
	duplicates := brokertest.CheckDelivered(t, msgs, got, false)
	for _, r := range got {
		if r.Key != r.ID {
			t.Errorf("%s: record key %q, want the dedup key", r.ID, r.Key)
		}
	}
	if duplicates == 0 {
		t.Error("no message arrived twice: the crash left no acknowledged record unrecorded")
	}
	t.Logf("%d duplicates, each under its original dedup key header", duplicates)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

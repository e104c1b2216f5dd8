package kafka_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// TestRelayProducesToKafka enqueues traced messages into the real outbox,
// relays them through the kafka sink into kfake and reads the topic: each
// message is there once, keyed by its dedup key, with the dedup key
// header, the enqueued payload, the row's own header and a traceparent
// whose parent is the relay's delivery span in the producer's trace.
func TestRelayProducesToKafka(t *testing.T) {
	t.Parallel()
	tg := target(newCluster(t).ListenAddrs()...)
	tg.Check = keyedByDedupKey
	brokertest.EndToEnd(t, tg, "events")
}

// TestOrderingKeyKeepsItsPartitionInOrder produces messages of interleaved
// ordering keys: each key's records are keyed by it and share one
// partition, in order.
func TestOrderingKeyKeepsItsPartitionInOrder(t *testing.T) {
	t.Parallel()
	for _, r := range brokertest.Ordered(t, target(newCluster(t).ListenAddrs()...), "orders") {
		var p brokertest.Payload
		if err := json.Unmarshal(r.Payload, &p); err != nil || p.Key != r.Key {
			t.Errorf("%s: record key %q, want the ordering key of %s", r.ID, r.Key, r.Payload)
		}
	}
}

// keyedByDedupKey checks that a record without an ordering key is keyed by
// its dedup key.
func keyedByDedupKey(t testing.TB, r brokertest.Received) {
	// The id is "<sink>/<dedup key>".
	if _, key, _ := strings.Cut(r.ID, "/"); r.Key != key {
		t.Errorf("%s: record key %q, want the dedup key", r.ID, r.Key)
	}
}

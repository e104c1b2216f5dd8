package kafka_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

func delivery(key string) *sink.Delivery {
	return &sink.Delivery{ID: 1, Sink: "events", DedupKey: key, Payload: json.RawMessage(`{"n":1}`), Attempt: 1, MaxAttempts: 10}
}

// TestProduceFailuresMapToOutcomes produces into situations the cluster or
// client refuses and checks that each is permanent and nothing was
// written.
func TestProduceFailuresMapToOutcomes(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	brokers := target(cluster.ListenAddrs()...).Options["brokers"]
	tests := []struct {
		name    string
		options map[string]any
		d       *sink.Delivery
	}{
		{"topic does not exist", map[string]any{"brokers": brokers, "topic": "no-such-topic"}, delivery("a")},
		{"topic template renders an invalid name", map[string]any{"brokers": brokers, "topic": "events {{.OrderingKey}}"}, delivery("b")},
		{"record over the producer's batch limit", map[string]any{"brokers": brokers, "topic": testTopic},
			&sink.Delivery{DedupKey: "c", Payload: json.RawMessage(`"` + strings.Repeat("x", 2<<20) + `"`)}},
	}
	for _, tt := range tests {
		if err := build(t, "events", tt.options).Deliver(t.Context(), tt.d); err == nil || !sink.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent error", tt.name, err)
		}
	}
	if got := records(t, cluster.ListenAddrs()); len(got) != 0 {
		t.Errorf("the topic holds %d records after refused produces", len(got))
	}
}

// Unreachable brokers are a retryable failure whose text does not name the
// SASL password.
func TestUnreachableClusterIsRetryableAndKeepsSecrets(t *testing.T) {
	t.Parallel()
	const password = "pa55-option"
	closed := "127.0.0.1:" + strconvItoa(proc.FreePort(t))
	snk := build(t, "events", map[string]any{
		"brokers": []any{closed}, "topic": testTopic, "timeout": "1s",
		"sasl_mechanism": "scram-sha-256", "username": "outboxd", "password": password,
	})
	err := snk.Deliver(t.Context(), delivery("k"))
	if err == nil || sink.IsPermanent(err) {
		t.Fatalf("unreachable cluster: %v, want a retryable error", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("the error repeats the password: %v", err)
	}
}

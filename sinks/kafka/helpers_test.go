package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/kafka"
)

// The binary registers the sink types in sinks/builtin. These tests build sinks
// through the registry, as plugins.yaml does, in this process and in the
// crash tests' children, so they register this one.
func init() { registry.Register(kafka.Type) }

// testTopic is the topic of every test: each test has a cluster of its own.
const testTopic = "outbox-events"

// testPartitions is the test topic's partition count: several, so that
// keys spread and per-key order is a property of the partitioning.
const testPartitions = 4

// consumeTimeout bounds reading a topic back.
const consumeTimeout = 30 * time.Second

// newCluster starts franz-go's in-process fake Kafka (there is no Kafka on
// this machine) with the test topic, closed when the test ends.
func newCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.SeedTopics(testPartitions, testTopic)}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// records reads every record of the test topic, in partition order.
func records(t testing.TB, brokers []string) []brokertest.Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), consumeTimeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(testTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, testTopic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	var out []brokertest.Received
	for int64(len(out)) < total {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), total, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			headers := map[string]string{}
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			out = append(out, brokertest.Received{
				ID: headers[kafka.DeliveryIDHeader], Dest: fmt.Sprintf("%s/%d", r.Topic, r.Partition),
				Payload: r.Value, Headers: headers, Key: string(r.Key),
			})
		})
	}
	return out
}

// target is the kafka sink producing to the test topic of the cluster at
// brokers.
func target(brokers ...string) brokertest.Target {
	list := make([]any, len(brokers))
	for i, b := range brokers {
		list[i] = b
	}
	return brokertest.Target{
		Type:    kafka.Type.Name,
		Options: map[string]any{"brokers": list, "topic": testTopic},
		Read:    func(t testing.TB) []brokertest.Received { return records(t, brokers) },
	}
}

// build makes a kafka sink through the registry, closed when the test
// ends.
func build(t *testing.T, name string, options map[string]any) sink.Sink {
	t.Helper()
	return brokertest.Target{Type: kafka.Type.Name, Options: options}.Build(t, name)
}

package kafka_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// The kafka sink keeps the sink contract (package sinktest) against
// franz-go's in-process fake Kafka: a cluster with the test topic, a topic
// it does not have, a broker that never answers, and a port nothing
// listens on.
func TestKafkaKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	cluster := newCluster(t)
	closed := "127.0.0.1:" + strconvItoa(proc.FreePort(t))
	to := func(t testing.TB, topic string, brokers ...string) sink.Sink {
		tg := target(brokers...)
		// The client retries what it may within timeout, so a refusal
		// it retries in vain comes back within the check's bounds.
		tg.Options["topic"], tg.Options["timeout"], tg.Options["connect_timeout"] = topic, "1s", "1s"
		return tg.Build(t, sinktest.SinkName)
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, testTopic, cluster.ListenAddrs()...) },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, r := range records(t, cluster.ListenAddrs()) {
				ids = append(ids, r.ID)
			}
			return ids
		},
		Retryable: func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, testTopic, closed)} },
		Permanent: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: to(t, "no-such-topic", cluster.ListenAddrs()...)}
		},
		// No RetryAfter: the idempotent producer retries a throttled
		// produce itself until the delivery's deadline, so the broker's
		// answer never reaches the sink's classification.
		Hang:        func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, testTopic, sinktest.SilentAddr(t))} },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, testTopic, closed) },
	})
}

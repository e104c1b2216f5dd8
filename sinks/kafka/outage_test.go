package kafka_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/proc"
	"github.com/outboxd/outboxd/internal/testdb"
)

// outageWait bounds the wait for the relay to notice the cluster is away.
const outageWait = 30 * time.Second

// A cluster that is down when the relay starts, and again mid-run (kfake
// closed and started again on the same port and data directory), only
// delays delivery: messages wait in the outbox, reach the topic once it is
// back, and none is dead-lettered.
func TestClusterDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	addr := "127.0.0.1:" + strconv.Itoa(proc.FreePort(t))
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		return newCluster(t, kfake.NumBrokers(1), kfake.Ports(mustPort(t, addr)), kfake.DataDir(dir))
	}
	pool, ob := testdb.New(t)
	sink := build(t, "events", map[string]any{"brokers": []any{addr}, "topic": testTopic, "timeout": "2s", "connect_timeout": "1s"})
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "events", Sink: sink})

	first := brokertest.Messages("events", "before", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, first); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	cluster := start()
	brokertest.WaitSent(t, pool, ob, "events", int64(len(first)), deliverTimeout)

	cluster.Close()
	second := brokertest.Messages("events", "during", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, second); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	start()
	brokertest.WaitSent(t, pool, ob, "events", int64(len(first)+len(second)), deliverTimeout)

	brokertest.CheckDelivered(t, append(first, second...), records(t, []string{addr}), false)
	if dead := testdb.StatusCounts(t, pool, ob, "events")["dead"]; dead > 0 {
		t.Errorf("%d messages dead-lettered by a short outage", dead)
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, _ := strings.Cut(addr, ":")
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

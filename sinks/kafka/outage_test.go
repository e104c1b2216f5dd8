package kafka_test

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// A cluster that is down when the relay starts, and again mid-run (kfake
// closed and started again on the same port and data directory), only
// delays delivery: messages wait in the outbox, reach the topic once it is
// back, and none is dead-lettered. (Mutation: classify making every
// produce error permanent fails this test.)
func TestClusterDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	port, dir := proc.FreePort(t), t.TempDir()
	var cluster *kfake.Cluster
	tg := target("127.0.0.1:" + strconv.Itoa(port))
	tg.Options["timeout"], tg.Options["connect_timeout"] = "2s", "1s"
	brokertest.Outage(t, tg, "events",
		func() { cluster.Close() },
		func() { cluster = newCluster(t, kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir)) })
}

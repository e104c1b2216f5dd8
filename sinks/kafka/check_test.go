package kafka_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// Check asks the brokers for their metadata without producing; with no
// broker listening it fails.
// (Mutation: Check returning nil without pinging passes the closed port
// and fails this test.)
func TestCheckPingsWithoutProducing(t *testing.T) {
	t.Parallel()
	tg := target(newCluster(t).ListenAddrs()...)
	away := build(t, "closed", map[string]any{"brokers": []any{"127.0.0.1:" + strconvItoa(proc.FreePort(t))}, "topic": testTopic, "connect_timeout": "1s"})
	sinktest.CheckChecker(t, build(t, "check", tg.Options), away, func() int { return len(tg.Read(t)) })
}

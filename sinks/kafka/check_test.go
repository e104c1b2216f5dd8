package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/proc"
)

// Check asks the brokers for their metadata without producing; with no
// broker listening it fails.
// (Mutation: Check returning nil without pinging passes the closed port
// and fails this test.)
func TestCheckPingsWithoutProducing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg := target(c.ListenAddrs()...)
	if err := build(t, "check", tg.Options).(sink.Checker).Check(ctx); err != nil {
		t.Fatalf("Check against the cluster: %v", err)
	}
	if got := tg.Read(t); len(got) != 0 {
		t.Errorf("Check produced %d records", len(got))
	}
	closed := build(t, "closed", map[string]any{"brokers": []any{"127.0.0.1:" + strconvItoa(proc.FreePort(t))}, "topic": testTopic, "connect_timeout": "1s"})
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if err := closed.(sink.Checker).Check(short); err == nil {
		t.Error("Check against a closed port succeeded")
	}
}

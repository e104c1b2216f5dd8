package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/proc"
)

// Check connects to the server and reads the JetStream account without
// publishing; against a port nothing listens on it fails.
// (Mutation: Check returning nil without connecting passes the closed
// port and fails this test.)
func TestCheckConnectsWithoutPublishing(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newStream(t, url)
	ok := build(t, "check", map[string]any{"url": url, "subject": s.subject})
	if err := ok.(sink.Checker).Check(ctx); err != nil {
		t.Fatalf("Check against the live server: %v", err)
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("Check published: stream holds %v messages (%v)", info, err)
	}
	closed := build(t, "closed", map[string]any{"url": "nats://127.0.0.1:" + itoa(proc.FreePort(t)), "subject": "x.y", "connect_timeout": "1s"})
	if err := closed.(sink.Checker).Check(ctx); err == nil {
		t.Error("Check against a closed port succeeded")
	}
}

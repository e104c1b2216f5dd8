package nats_test

import (
	"context"
	"testing"

	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// Check connects to the server and reads the JetStream account without
// publishing; against a port nothing listens on it fails.
// (Mutation: Check returning nil without connecting passes the closed
// port and fails this test.)
func TestCheckConnectsWithoutPublishing(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	s := newStream(t, url)
	live := build(t, "check", map[string]any{"url": url, "subject": s.subject})
	away := build(t, "closed", map[string]any{"url": "nats://127.0.0.1:" + itoa(proc.FreePort(t)), "subject": "x.y", "connect_timeout": "1s"})
	sinktest.CheckChecker(t, live, away, func() int {
		info, err := s.stream.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(info.State.Msgs)
	})
}

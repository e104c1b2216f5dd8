package rabbitmq_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/proc"
)

// Check connects to the broker and opens the confirming channel without
// publishing; with a password the broker refuses, and against a port
// nothing listens on, it fails.
// (Mutation: Check returning nil without acquiring the link passes the
// refused password and fails this test.)
func TestCheckConnectsWithoutPublishing(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ok := build(t, "check", map[string]any{"url": brokerURL(addr), "exchange": q.exchange, "routing_key": "events"})
	if err := ok.(sink.Checker).Check(ctx); err != nil {
		t.Fatalf("Check against the live broker: %v", err)
	}
	if got := q.messages(t); len(got) != 0 {
		t.Errorf("Check published %d messages", len(got))
	}
	for name, url := range map[string]string{
		"refused password": "amqp://guest:not-the-password@" + addr + "/",
		"closed port":      "amqp://guest:guest@127.0.0.1:" + strconvItoa(proc.FreePort(t)) + "/",
	} {
		s := build(t, "bad", map[string]any{"url": url, "exchange": q.exchange, "routing_key": "events", "connect_timeout": "2s"})
		if err := s.(sink.Checker).Check(ctx); err == nil {
			t.Errorf("Check with a %s succeeded", name)
		}
	}
}

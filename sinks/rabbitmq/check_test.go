package rabbitmq_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// Check connects to the broker and opens the confirming channel without
// publishing; against a port nothing listens on, and with a password the
// broker refuses, it fails.
// (Mutation: Check returning nil without acquiring the link passes the
// closed port and fails this test.)
func TestCheckConnectsWithoutPublishing(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	q := newQueue(t, addr)
	options := func(url string) map[string]any {
		return map[string]any{"url": url, "exchange": q.exchange, "routing_key": "events", "connect_timeout": "2s"}
	}
	sent := func() int { return len(q.messages(t)) }
	live := build(t, "check", options(brokerURL(addr)))
	sinktest.CheckChecker(t, live, build(t, "closed", options("amqp://guest:guest@127.0.0.1:"+strconvItoa(proc.FreePort(t))+"/")), sent)
	sinktest.CheckChecker(t, live, build(t, "refused", options("amqp://guest:not-the-password@"+addr+"/")), sent)
}

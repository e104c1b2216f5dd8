package relay_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestRelayLogsAFailureStreakOnceAndItsRecovery: a sink failing three
// attempts before it accepts the message gets one WARN line for the first
// failure, with its error stripped of the secret Config.Redact knows, and
// one INFO line when it recovers, naming the three failures; the retries
// in between write nothing. (Mutation: removing the failure log's call
// from finish fails this test; so does passing it err.Error() instead of
// the relay's redacted text.)
func TestRelayLogsAFailureStreakOnceAndItsRecovery(t *testing.T) {
	b := coretest.Setup(t)
	logger, logs := captureLogs()
	const token = "xoxb-streak-secret-42"
	var attempts atomic.Int32
	flaky := sink.Func(func(context.Context, *sink.Delivery) error {
		if attempts.Add(1) <= 3 {
			return errors.New("receiver down; it said: invalid_auth for " + token)
		}
		return nil
	})
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond, Logger: logger,
		Redact: func(s string) string { return strings.ReplaceAll(s, token, "[REDACTED]") },
		Sinks:  []relay.SinkConfig{{Name: "flaky", Sink: flaky, Backoff: relay.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}}}})
	if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "flaky", DedupKey: "m", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 20*time.Second, "flaky", "sent", 1)
	var warns, infos []string
	for line := range strings.Lines(logs.String()) {
		switch {
		case strings.Contains(line, "level=WARN"):
			warns = append(warns, line)
		case strings.Contains(line, "deliveries succeed again"):
			infos = append(infos, line)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "sink=flaky") || !strings.Contains(warns[0], "invalid_auth for [REDACTED]") {
		t.Errorf("WARN lines for a 3-failure streak: %q", warns)
	}
	if len(infos) != 1 || !strings.Contains(infos[0], "level=INFO") || !strings.Contains(infos[0], "failures=3") || !strings.Contains(infos[0], "failing_for=") {
		t.Errorf("recovery lines: %q", infos)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the secret reached the log:\n%s", logs.String())
	}
}

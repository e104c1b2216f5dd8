package e2e_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
)

// echoingEnv is a migrated env whose sink "partner" (1000 attempts,
// 100ms..200ms apart) delivers to a receiver answering 503, its body
// quoting the webhook's signing secret the way an error page may echo a
// credential, until told to accept.
func echoingEnv(t *testing.T) (*flakyReceiver, *env) {
	t.Helper()
	rcv := newFlakyReceiver(t, http.StatusServiceUnavailable)
	rcv.mu.Lock()
	rcv.errorBody = "upstream refused the signing key " + webhookSecret
	rcv.mu.Unlock()
	e := newEnv(t, sinkYAML("partner", rcv.URL, 1000, ""), "")
	e.mustRun("migrate")
	return rcv, e
}

// logLines parses serve's JSON log lines.
func logLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %v: %q", err, line)
		}
		out = append(out, rec)
	}
	return out
}

// withMsg returns the lines whose message starts with prefix.
func withMsg(lines []map[string]any, prefix string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestServeLogsFailureStreak: a receiver failing every attempt, then
// accepting, makes `outboxd serve` log one WARN line for the streak's
// first failure, with the error scrubbed of the signing secret the
// receiver echoed, and one INFO line when it recovers, its duration
// written as Go writes it ("1.5s"), not in nanoseconds; the secret is in
// no line. (Mutation: removing the duration case of the logger's
// ReplaceAttr fails this test. The secret is removed twice, by the relay's
// Redact and by the logger's scrubber: dropping both fails it;
// TestRelayLogsAFailureStreakOnceAndItsRecovery and
// TestLoggerScrubsMessagesAndAttributes check each on its own.)
func TestServeLogsFailureStreak(t *testing.T) {
	t.Parallel()
	rcv, e := echoingEnv(t)
	e.mustRun("enqueue", "--sink", "partner", "--key", "m-1", "--text", "hello")
	srv := e.serve()
	eventually(t, 30*time.Second, "the first failure's WARN line", func() bool {
		return len(withMsg(logLines(t, srv.Logs()), "outbox: delivery failed")) > 0
	})
	// Three failed attempts at least, so that the retries are seen not to
	// log: attempts counts the claims, so the third's failure is written
	// once the row is failed again (a receiver turned healthy while that
	// attempt was on its way made a streak of two).
	eventually(t, 30*time.Second, "a third failed attempt", func() bool {
		var attempts float64
		var status string
		if err := e.pool.QueryRow(t.Context(), "SELECT attempts, status FROM "+e.schema+".messages_all").Scan(&attempts, &status); err != nil {
			t.Fatal(err)
		}
		return attempts >= 3 && status == "failed"
	})
	rcv.answer(http.StatusOK)
	eventually(t, 30*time.Second, "the recovery's INFO line", func() bool {
		return len(withMsg(logLines(t, srv.Logs()), "outbox: deliveries succeed again")) > 0
	})

	lines := logLines(t, srv.Logs())
	first := withMsg(lines, "outbox: delivery failed")
	if len(first) != 1 || first[0]["level"] != "WARN" || first[0]["sink"] != "partner" {
		t.Fatalf("first-failure lines: %v", first)
	}
	if msg, _ := first[0]["error"].(string); !strings.Contains(msg, "503") || !strings.Contains(msg, "[REDACTED]") {
		t.Errorf("the first failure's error: %q", msg)
	}
	recovered := withMsg(lines, "outbox: deliveries succeed again")[0]
	failingFor, isText := recovered["failing_for"].(string)
	if d, err := time.ParseDuration(failingFor); !isText || err != nil || d <= 0 || recovered["level"] != "INFO" {
		t.Errorf("the recovery line: %v", recovered)
	}
	if n, _ := recovered["failures"].(float64); n < 3 {
		t.Errorf("the recovery counts %v failures, want the streak's 3 or more", recovered["failures"])
	}
	if strings.Contains(srv.Logs(), strings.TrimPrefix(webhookSecret, "whsec_")) {
		t.Errorf("a log line holds the signing secret:\n%s", srv.Logs())
	}
}

// TestServeLogLevelFilters: with --log-level warn, serve writes its
// warnings (the failure streak's) and none of its INFO lines ("relay
// running" and the rest); an unknown level is refused by any command with
// exit code 2. (Mutation: not passing --log-level's value to the logger,
// or not checking it in the root command, fails this test.)
func TestServeLogLevelFilters(t *testing.T) {
	t.Parallel()
	_, e := echoingEnv(t)
	if _, stderr, code := e.run(nil, "--log-level", "verbose", "stats"); code != 2 || !strings.Contains(stderr, "--log-level") {
		t.Fatalf("--log-level verbose: exit %d, %q", code, stderr)
	}
	e.mustRun("enqueue", "--sink", "partner", "--key", "m-1", "--text", "hello")
	// Started without waiting for its address: the line that names it is
	// an INFO line.
	srv := proc.Start(t, outboxdBinary(t), e.environ(), "--config", e.config, "--log-level", "warn", "serve", "--log-format", "json")
	eventually(t, 30*time.Second, "the first failure's WARN line", func() bool {
		return len(withMsg(logLines(t, srv.Logs()), "outbox: delivery failed")) > 0
	})
	if err := srv.Stop(); err != nil {
		t.Fatalf("serve did not stop cleanly: %v\n%s", err, srv.Logs())
	}
	for _, l := range logLines(t, srv.Logs()) {
		if l["level"] == "INFO" || l["level"] == "DEBUG" {
			t.Errorf("--log-level warn wrote %v", l)
		}
	}
}

package telemetry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/secret"
)

// TestLoggerWritesDurationsAsText: a duration attribute reads "1.5s" in
// the JSON and text formats alike, not a count of nanoseconds. (Mutation:
// removing the KindDuration case of replaceAttr makes the JSON line carry
// 1500000000.)
func TestLoggerWritesDurationsAsText(t *testing.T) {
	t.Parallel()
	for _, format := range []string{LogFormatJSON, LogFormatText} {
		var buf bytes.Buffer
		log, err := NewLogger(format, LogLevelInfo, &buf, false, secret.NewScrubber())
		if err != nil {
			t.Fatal(err)
		}
		log.Info("retrying", "retry_in", 1500*time.Millisecond)
		if format == LogFormatJSON {
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["retry_in"] != "1.5s" {
				t.Errorf("json: retry_in is %#v, want \"1.5s\"", rec["retry_in"])
			}
		} else if !strings.Contains(buf.String(), "retry_in=1.5s") {
			t.Errorf("text: %q", buf.String())
		}
	}
}

// TestLoggerLevelFilters: --log-level keeps the records at its level and
// above; an unknown level is refused naming the flag. (Mutation: leaving
// HandlerOptions.Level unset, info whatever the flag says, fails this
// test.)
func TestLoggerLevelFilters(t *testing.T) {
	t.Parallel()
	for level, want := range map[string]string{
		LogLevelDebug: "debug info warn error",
		LogLevelInfo:  "info warn error",
		LogLevelWarn:  "warn error",
		LogLevelError: "error",
	} {
		var buf bytes.Buffer
		log, err := NewLogger(LogFormatText, level, &buf, false, secret.NewScrubber())
		if err != nil {
			t.Fatal(err)
		}
		log.Debug("debug")
		log.Info("info")
		log.Warn("warn")
		log.Error("error")
		var got []string
		for line := range strings.Lines(buf.String()) {
			_, msg, _ := strings.Cut(line, "msg=")
			got = append(got, strings.TrimSpace(msg))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("--log-level %s wrote %q, want %q", level, got, want)
		}
	}
	if _, err := NewLogger(LogFormatText, "verbose", &bytes.Buffer{}, false, secret.NewScrubber()); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("an unknown level: %v", err)
	}
}

// TestLoggerScrubsMessagesAndAttributes: a known secret is replaced in
// the message and in attributes, also once durations are handled.
// (Mutation: returning a from replaceAttr without calling the scrubber
// fails this test.)
func TestLoggerScrubsMessagesAndAttributes(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log, err := NewLogger(LogFormatJSON, LogLevelInfo, &buf, false, secret.NewScrubber("tok-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("failed with tok-0123456789", "error", "HTTP 401: tok-0123456789 rejected", "for", time.Second)
	if strings.Contains(buf.String(), "tok-0123456789") || !strings.Contains(buf.String(), secret.Redacted) {
		t.Errorf("the secret reached the log: %s", buf.String())
	}
}

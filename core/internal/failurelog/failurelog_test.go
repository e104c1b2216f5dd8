package failurelog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/failurelog"
	"github.com/outboxd/outboxd/core/sink"
)

// line is one record the log wrote, its attributes as text.
type line struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder is a slog.Handler keeping every record.
type recorder struct {
	mu    sync.Mutex
	lines []line
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	l := line{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, l)
	return nil
}

// take returns the lines written since the last call.
func (r *recorder) take() []line {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lines
	r.lines = nil
	return out
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// redactToken renders an error the way the relay's Redact would, for
// the secret "tok-secret".
func redactToken(err error) string {
	return strings.ReplaceAll(err.Error(), "tok-secret", "[REDACTED]")
}

// newLog returns a Log on a clock of its own, writing to a recorder.
func newLog() (*clock, *failurelog.Log, *recorder) {
	c, rec := &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}, &recorder{}
	return c, failurelog.New(slog.New(rec), redactToken, c.now), rec
}

var (
	partner = failurelog.Receiver{Sink: "partner"}
	keyA    = failurelog.Receiver{Sink: "hooks", Key: "a"}
	errDown = errors.New("HTTP 503 Service Unavailable")
)

// TestFirstFailureWarnsWithTheError: the first failed attempt of a streak
// is one WARN naming the receiver, the message and the error, rendered
// by the relay's text (scrubbed of secrets); the next failures within the
// minute write nothing. (Mutation: logging every failure at WARN, or
// dropping the text function so the raw error is logged, fails this test.)
func TestFirstFailureWarnsWithTheError(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	l.Attempted(keyA, 7, errors.New("401 from receiver: token tok-secret rejected"))
	got := rec.take()
	if len(got) != 1 || got[0].level != slog.LevelWarn {
		t.Fatalf("first failure wrote %+v, want one WARN", got)
	}
	a := got[0].attrs
	if a["sink"] != "hooks" || a["key"] != "a" || a["id"] != "7" || a["error"] != "401 from receiver: token [REDACTED] rejected" {
		t.Fatalf("first failure's attributes %v", a)
	}
	for range 10 {
		c.advance(5 * time.Second)
		l.Attempted(keyA, 8, errDown)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("failures within a minute of the first wrote %+v", got)
	}
}

// TestSummaryAtMostOncePerMinutePerReceiver: while failures go on, a
// receiver gets one summary line per minute at most, counting the
// failures since its last line, with the last error; another receiver
// failing at the same time has lines of its own. (Mutation: comparing the
// time since the last line with zero instead of SummaryEvery, or keying
// streaks by sink alone, fails this test.)
func TestSummaryAtMostOncePerMinutePerReceiver(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	other := failurelog.Receiver{Sink: "hooks", Key: "b"}
	l.Attempted(keyA, 1, errDown)
	l.Attempted(other, 2, errDown)
	if got := rec.take(); len(got) != 2 {
		t.Fatalf("two receivers' first failures wrote %d lines, want 2", len(got))
	}
	var summaries []line
	for i := 1; i <= 18; i++ { // every 10s for 3 minutes
		c.advance(10 * time.Second)
		l.Attempted(keyA, 1, fmt.Errorf("attempt %d: %w", i, errDown))
		l.Attempted(other, 2, errDown)
		summaries = append(summaries, rec.take()...)
	}
	var forA []line
	for _, s := range summaries {
		if s.level != slog.LevelWarn {
			t.Fatalf("summary at %s, want WARN: %+v", s.level, s)
		}
		if s.attrs["key"] == "a" {
			forA = append(forA, s)
		}
	}
	if len(summaries) != 6 || len(forA) != 3 {
		t.Fatalf("3 minutes of failures at 2 receivers wrote %d summaries (%d for a), want 3 each: %+v", len(summaries), len(forA), summaries)
	}
	for i, s := range forA {
		if s.msg != "outbox: 6 failures in the last 1m0s" || s.attrs["failures"] != "6" {
			t.Errorf("summary %d: %q %v", i, s.msg, s.attrs)
		}
	}
	last := forA[2].attrs
	if last["last_error"] != "attempt 18: "+errDown.Error() || last["streak_failures"] != "19" || last["failing_for"] != "3m0s" {
		t.Errorf("last summary's attributes %v", last)
	}
}

// TestRecoveryLogsInfoOnce: the first success after a streak is an INFO
// line with the streak's length and duration (as "1m30s"); the next
// success writes nothing, and the next failure starts a new streak with a
// WARN. (Mutation: not forgetting the streak on success makes the second
// success log again and the new failure stay silent.)
func TestRecoveryLogsInfoOnce(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	l.Attempted(partner, 1, errDown)
	c.advance(30 * time.Second)
	l.Attempted(partner, 1, errDown)
	c.advance(60*time.Second + 250*time.Microsecond)
	rec.take()
	l.Attempted(partner, 1, nil)
	l.Attempted(partner, 2, nil)
	got := rec.take()
	if len(got) != 1 || got[0].level != slog.LevelInfo || got[0].msg != "outbox: deliveries succeed again" {
		t.Fatalf("recovery wrote %+v, want one INFO", got)
	}
	if a := got[0].attrs; a["sink"] != "partner" || a["failures"] != "2" || a["failing_for"] != "1m30s" {
		t.Fatalf("recovery's attributes %v", a)
	}
	if _, keyed := got[0].attrs["key"]; keyed {
		t.Errorf("a sink without keys got a key attribute: %v", got[0].attrs)
	}
	l.Attempted(partner, 3, errDown)
	if got := rec.take(); len(got) != 1 || got[0].level != slog.LevelWarn {
		t.Fatalf("a failure after the recovery wrote %+v, want a new streak's WARN", got)
	}
}

// TestPermanentFailuresAreNoStreak: a permanent failure (a payload the
// receiver refuses, logged as a dead letter anyway) neither starts a
// streak nor ends or extends one. (Mutation: dropping the IsPermanent test
// fails this test.)
func TestPermanentFailuresAreNoStreak(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	refused := sink.Permanent(errors.New("400 bad payload"))
	l.Attempted(partner, 1, refused)
	l.Attempted(partner, 2, nil)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a permanent failure and a success wrote %+v", got)
	}
	l.Attempted(partner, 3, errDown)
	c.advance(2 * failurelog.SummaryEvery)
	l.Attempted(partner, 4, refused)
	rec.take()
	l.Attempted(partner, 5, nil)
	if got := rec.take(); len(got) != 1 || got[0].attrs["failures"] != "1" {
		t.Fatalf("a streak of one retryable failure, a permanent one within it: %+v", got)
	}
}

// TestIdleStreaksAreForgotten: a streak without attempts for IdleAfter is
// dropped when another failure sweeps the table, so receivers that come
// and go do not grow it: a success there later is no recovery, a failure a
// new streak. (Mutation: removing the sweep makes the late success log a
// recovery.)
func TestIdleStreaksAreForgotten(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	l.Attempted(keyA, 1, errDown)
	c.advance(failurelog.IdleAfter)
	l.Attempted(partner, 2, errDown) // sweeps
	rec.take()
	l.Attempted(keyA, 1, nil)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a success at a forgotten receiver wrote %+v", got)
	}
	l.Attempted(partner, 2, nil)
	if got := rec.take(); len(got) != 1 || got[0].level != slog.LevelInfo {
		t.Fatalf("the recent streak's recovery wrote %+v", got)
	}
}

// TestStreaksAreBounded: past MaxStreaks receivers failing at once, the
// others' failures are summarised together instead of tracked one by one.
// (Mutation: removing the MaxStreaks check makes the extra receivers
// each log a first failure.)
func TestStreaksAreBounded(t *testing.T) {
	t.Parallel()
	c, l, rec := newLog()
	for i := range failurelog.MaxStreaks {
		l.Attempted(failurelog.Receiver{Sink: "hooks", Key: fmt.Sprint(i)}, 1, errDown)
	}
	rec.take()
	for i := range 5 {
		l.Attempted(failurelog.Receiver{Sink: "hooks", Key: fmt.Sprint("extra-", i)}, 1, errDown)
	}
	if got := rec.take(); len(got) != 1 || !strings.Contains(got[0].msg, "beyond the 10000 tracked") {
		t.Fatalf("5 failures beyond the bound wrote %+v, want one line", got)
	}
	c.advance(failurelog.SummaryEvery)
	l.Attempted(failurelog.Receiver{Sink: "hooks", Key: "extra-9"}, 1, errDown)
	if got := rec.take(); len(got) != 1 || got[0].attrs["failures"] != "5" {
		t.Fatalf("the summary of the untracked failures: %+v", got)
	}
}

// TestSuccessWithoutStreakAllocatesNothing: a success costs no allocation,
// with no streak under way and with one at another receiver. (Mutation:
// building the receiver's attributes before the lookup fails this
// test.)
func TestSuccessWithoutStreakAllocatesNothing(t *testing.T) {
	_, l, _ := newLog()
	if n := testing.AllocsPerRun(100, func() { l.Attempted(partner, 1, nil) }); n != 0 {
		t.Errorf("a success without streaks: %v allocations", n)
	}
	l.Attempted(keyA, 1, errDown)
	if n := testing.AllocsPerRun(100, func() { l.Attempted(partner, 1, nil) }); n != 0 {
		t.Errorf("a success while another receiver fails: %v allocations", n)
	}
}

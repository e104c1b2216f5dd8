// Package failurelog logs what an on-call engineer needs to know about
// failing deliveries, per receiver (a sink, or one rate key of a sink
// limited per key), without a line per failed attempt: the first failed
// attempt of a streak at WARN with its error, then at most one summary per
// receiver per SummaryEvery while failures go on, and an INFO line when
// the receiver recovers, with the streak's length and duration.
//
// Permanent failures are not part of a streak: they say nothing about the
// receiver's health (a payload it refuses) and are logged as dead
// letters at once. Retryable failures, Retry-After answers included, are
// what stays silent until the last attempt without this log.
package failurelog

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// SummaryEvery is the least time between two summary lines of one
// receiver's streak.
const SummaryEvery = time.Minute

// IdleAfter is how long a streak lasts without attempts before it is
// forgotten: its receiver went away (a key no longer used, a sink
// removed) or its rows were dead-lettered. Forgetting it bounds the table
// as receivers come and go; a later failure there starts a new streak.
const IdleAfter = 10 * time.Minute

// MaxStreaks bounds how many receivers are tracked one by one. Failures
// at receivers beyond it, when that many fail within IdleAfter, are
// summarised together, once per SummaryEvery.
const MaxStreaks = 10_000

// durationPrecision rounds the durations the lines report: a streak's
// nanoseconds tell an on-call engineer nothing.
const durationPrecision = time.Millisecond

// Receiver is where a delivery goes: its sink and, for a sink limited
// per key, its rate key ("" otherwise).
type Receiver struct {
	Sink, Key string
}

// streak is a receiver's run of failed attempts, since its first.
type streak struct {
	started     time.Time // the first failure
	failures    int       // in the streak
	unreported  int       // since the last line
	lastLine    time.Time
	lastAttempt time.Time
	lastErr     error
}

// Log tracks the streaks and writes their lines. Its methods are safe for
// concurrent use.
type Log struct {
	logger *slog.Logger
	text   func(error) string
	now    func() time.Time

	// active is len(streaks), read without the lock: while no receiver
	// fails, a success costs one atomic load.
	active atomic.Int64

	mu        sync.Mutex
	streaks   map[Receiver]*streak
	nextSweep time.Time
	overflow  streak // failures at receivers beyond MaxStreaks
}

// New returns a Log writing to logger. text renders an error as the lines
// show it (the relay's: with the configuration's secrets removed); now is
// the clock (time.Now but in tests).
func New(logger *slog.Logger, text func(error) string, now func() time.Time) *Log {
	return &Log{logger: logger, text: text, now: now, streaks: map[Receiver]*streak{}}
}

// Attempted records the outcome of an attempt of message id at d: err nil
// for a success. While no streak is under way a success takes no lock,
// looks nothing up and allocates nothing.
func (l *Log) Attempted(d Receiver, id int64, err error) {
	switch {
	case err == nil:
		if l.active.Load() > 0 {
			l.succeeded(d)
		}
	case !sink.IsPermanent(err):
		l.failed(d, id, err)
	}
}

func (l *Log) succeeded(d Receiver) {
	l.mu.Lock()
	s, ok := l.streaks[d]
	if !ok {
		l.mu.Unlock()
		return
	}
	now := l.now()
	l.forget(d)
	l.mu.Unlock()
	l.logger.Info("outbox: deliveries succeed again", append(d.attrs(),
		slog.Int("failures", s.failures),
		slog.Duration("failing_for", now.Sub(s.started).Round(durationPrecision)))...)
}

func (l *Log) failed(d Receiver, id int64, err error) {
	now := l.now()
	l.mu.Lock()
	l.sweep(now)
	s, tracked := l.streaks[d]
	if !tracked && len(l.streaks) >= MaxStreaks {
		l.failedUntracked(d, id, now, err)
		return
	}
	if !tracked {
		l.streaks[d] = &streak{started: now, failures: 1, lastLine: now, lastAttempt: now}
		l.active.Add(1)
		l.mu.Unlock()
		// The message keeps "destination" (a receiver in today's words) for
		// compatibility: the README quotes it, and log searches may match it.
		l.logger.Warn("outbox: delivery failed; more failures at this destination are summarised at most every "+SummaryEvery.String()+" until one succeeds",
			append(d.attrs(), slog.Int64("id", id), slog.String("error", l.text(err)))...)
		return
	}
	s.failures++
	s.lastAttempt = now
	n, window, last, due := s.record(now, err)
	total, failingFor := s.failures, now.Sub(s.started)
	l.mu.Unlock()
	if due {
		l.logger.Warn("outbox: "+failures(n)+" in the last "+window.String(), append(d.attrs(),
			slog.Int("failures", n), slog.Int("streak_failures", total),
			slog.Duration("failing_for", failingFor.Round(durationPrecision)),
			slog.String("last_error", l.text(last)))...)
	}
}

// failedUntracked counts a failure at a receiver the table has no room
// for: the first such failure is logged with its error, the later ones
// summarised like a streak's. l.mu is held and released here.
func (l *Log) failedUntracked(d Receiver, id int64, now time.Time, err error) {
	o := &l.overflow
	if o.lastLine.IsZero() {
		o.lastLine = now
		l.mu.Unlock()
		l.logger.Warn(fmt.Sprintf("outbox: delivery failed at a receiver beyond the %d tracked one by one; failures at such receivers are summarised together at most every %s", MaxStreaks, SummaryEvery),
			append(d.attrs(), slog.Int64("id", id), slog.String("error", l.text(err)))...)
		return
	}
	n, window, last, due := o.record(now, err)
	l.mu.Unlock()
	if due {
		l.logger.Warn(fmt.Sprintf("outbox: %s in the last %s at receivers beyond the %d tracked one by one", failures(n), window, MaxStreaks),
			append(d.attrs(), slog.Int("failures", n), slog.String("last_error", l.text(last)))...)
	}
}

// record counts a failure of s at now and reports whether a summary is due
// (SummaryEvery has passed since the last line), with the failures since
// that line, the time they span and the last error; it starts the next
// summary's count when one is.
func (s *streak) record(now time.Time, err error) (n int, window time.Duration, last error, due bool) {
	s.unreported++
	s.lastErr = err
	window = now.Sub(s.lastLine)
	if window < SummaryEvery {
		return 0, 0, nil, false
	}
	n, last = s.unreported, s.lastErr
	s.unreported, s.lastLine, s.lastErr = 0, now, nil
	return n, window.Round(time.Second), last, true
}

// failures is "1 failure" or "n failures".
func failures(n int) string {
	if n == 1 {
		return "1 failure"
	}
	return fmt.Sprintf("%d failures", n)
}

// sweep forgets the streaks without an attempt for IdleAfter, at most once
// per SummaryEvery; l.mu is held.
func (l *Log) sweep(now time.Time) {
	if now.Before(l.nextSweep) {
		return
	}
	l.nextSweep = now.Add(SummaryEvery)
	for d, s := range l.streaks {
		if now.Sub(s.lastAttempt) >= IdleAfter {
			l.forget(d)
		}
	}
}

// forget drops d's streak; l.mu is held.
func (l *Log) forget(d Receiver) {
	delete(l.streaks, d)
	l.active.Add(-1)
}

// attrs name the receiver in a line: its sink, and its key when it has
// one.
func (d Receiver) attrs() []any {
	if d.Key == "" {
		return []any{slog.String("sink", d.Sink)}
	}
	return []any{slog.String("sink", d.Sink), slog.String("key", d.Key)}
}

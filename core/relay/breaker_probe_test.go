package relay_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// noRowToProbe is the text a probe round that found no row once stored as
// the breaker's last failure, in place of the receiver's answer.
const noRowToProbe = "no row to probe"

// sinkBreaker is the open breaker of sinkName as a whole as `outboxd
// stats`, the API and the console read it (operator.Breakers), or false.
func sinkBreaker(t *testing.T, b coretest.Bundle, sinkName string) (operator.BreakerState, bool) {
	t.Helper()
	open, err := b.Outbox.Breakers(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range open[sinkName] {
		if s.Key == "" {
			return s, true
		}
	}
	return operator.BreakerState{}, false
}

// timedSink records when each delivery it passes on ended and with what
// error.
type timedSink struct {
	next sink.Sink

	mu    sync.Mutex
	calls []timedCall
}

// timedCall is one delivery through a timedSink.
type timedCall struct {
	at  time.Time
	err error
}

func (s *timedSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	err := s.next.Deliver(ctx, d)
	s.mu.Lock()
	s.calls = append(s.calls, timedCall{at: time.Now(), err: err})
	s.mu.Unlock()
	return err
}

// snapshot is every delivery so far, in the order they ended.
func (s *timedSink) snapshot() []timedCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]timedCall(nil), s.calls...)
}

// TestBreakerRetryAfterPauseSpendsNoProbe (issue 40 item 4): a receiver
// answers 429 with Retry-After: 7 until the breaker opens (probe interval
// 2 s, shorter than the pause), then 200. While the sink is paused no
// probe is spent on it (no request, none counted, the breaker still shows
// the receiver's 429), and the first request after the pause goes out
// when the pause ends: within a poll interval, plus a margin for a loaded
// machine, not at the next doubled probe interval (14 s after the breaker
// opened, 7 s after the pause's end).
//
// Checked with the mutation "probeSinks takes the probe of a paused sink,
// and a round without a row records the failure 'no row to probe with'"
// (the code before this test): probes were counted during the pause, the
// breaker showed "no row to probe with", and the first request came about
// 7 s after the pause's end.
func TestBreakerRetryAfterPauseSpendsNoProbe(t *testing.T) {
	b := coretest.Setup(t)
	rc := newFlakyReceiver(t, http.StatusTooManyRequests)
	const pause = 7 * time.Second
	rc.retry = "7"
	hook := &timedSink{next: webhookSink(t, rc.url())}
	const rows = 4
	b.EnqueueN(t, "hook", rows, nil)
	const poll = 100 * time.Millisecond
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: poll, Concurrency: rows,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: 5,
			CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: 2, ProbeInterval: 2 * time.Second,
				MaxProbeInterval: time.Minute}}}})
	signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })
	// The rows in flight as it opened end within the pause.
	testrelay.WaitFor(t, 30*time.Second, "no row in flight", func() bool { return b.StatusCounts(t)["in_progress"] == 0 })
	rc.mu.Lock()
	rc.status, rc.retry = http.StatusOK, ""
	rc.mu.Unlock()
	first := hook.snapshot()
	// The pause runs from the last 429: each one extends it.
	pauseEnd := first[len(first)-1].at.Add(pause)

	// Just before the pause ends: nothing was sent or spent meanwhile, and
	// the breaker shows the receiver's answer.
	testrelay.WaitFor(t, 30*time.Second, "the pause's last second", func() bool { return time.Now().After(pauseEnd.Add(-time.Second)) })
	s, open := sinkBreaker(t, b, "hook")
	if !open || !strings.Contains(s.LastFailure, "429") || s.Probes != 0 {
		t.Errorf("breaker %+v (open %v) during the pause, want open with the receiver's 429 and no probe counted", s, open)
	}
	if n := len(hook.snapshot()); n != len(first) {
		t.Errorf("%d requests during the pause, want none", n-len(first))
	}

	testrelay.WaitFor(t, 30*time.Second, "every row sent", func() bool { return b.StatusCounts(t)["sent"] == rows })
	calls := hook.snapshot()
	next := calls[len(first)]
	late := next.at.Sub(pauseEnd)
	// A poll interval for the relay to see the pause end and take the
	// probe, and a margin for a loaded machine: well under the 7 s the
	// doubled probe interval made of it.
	if most := poll + 2*time.Second; late > most || late < -poll || next.err != nil {
		t.Errorf("first request after the pause %s after its end (error %v), want within %s and answered", late.Round(time.Millisecond), next.err, most)
	}
	t.Logf("first request %s after the pause's end", late.Round(time.Millisecond))
}

// TestBreakerNoRowToProbeKeepsTheRealFailure (issue 40 item 4, issue 43
// item 2): a receiver answers 500 until its breaker opens and every row is
// dead (max_attempts 1: a 500 spends the attempt): each probe round then
// finds no row to probe with. Such a round is no failure: the breaker
// keeps showing the receiver's answer (a 500) as its last failure, counts
// no probe, and does not double its interval (eight rounds 300 ms apart
// come within seconds; doubled, they take 0.3 * 255 s).
//
// Checked with the mutation "a probe round without a row calls probeFailed
// with 'no row to probe with'" (the code before this test): the last
// failure read "no row to probe with" and the wait for eight rounds timed
// out.
func TestBreakerNoRowToProbeKeepsTheRealFailure(t *testing.T) {
	b := coretest.Setup(t)
	rc := newFlakyReceiver(t, http.StatusInternalServerError)
	hook := webhookSink(t, rc.url())
	const probe = 300 * time.Millisecond
	const rows = 4
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 50 * time.Millisecond, Concurrency: rows,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: 1,
			CircuitBreaker: relay.CircuitBreaker{FailureRatio: 0.5, MinDeliveries: rows,
				ProbeInterval: probe, MaxProbeInterval: time.Minute}}}})
	b.EnqueueN(t, "hook", rows, nil)
	signals.WaitWritten(t, 30*time.Second, "hook", "dead", rows)
	signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })

	const rounds = 8
	seen := map[time.Time]bool{}
	var last operator.BreakerState
	testrelay.WaitFor(t, 20*time.Second, "eight probe rounds", func() bool {
		s, ok := sinkBreaker(t, b, "hook")
		if !ok {
			t.Fatal("the breaker closed without a probe answered")
		}
		last = s
		seen[s.NextProbe] = true
		return len(seen) > rounds
	})
	if strings.Contains(last.LastFailure, noRowToProbe) || !strings.Contains(last.LastFailure, "500") {
		t.Errorf("last failure %q after rounds without a row, want the receiver's 500", last.LastFailure)
	}
	// A round holds its probe for a moment before giving it back: the
	// count is read between rounds.
	testrelay.WaitFor(t, 10*time.Second, "no probe counted", func() bool {
		s, ok := sinkBreaker(t, b, "hook")
		return ok && s.Probes == 0
	})
	if n := rc.requests.Load(); n != rows {
		t.Errorf("%d requests to the receiver, want the %d deliveries and no probe", n, rows)
	}
}

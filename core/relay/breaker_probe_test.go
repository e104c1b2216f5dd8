package relay_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// noRowToProbe is the text a probe round that found no row once stored as
// the breaker's last failure, in place of the receiver's answer.
const noRowToProbe = "no row to probe"

// hookBreaker is the open breaker of the sink "hook" as `outboxd stats`,
// `sinks list` and the console read it (operator.Breakers), or false.
func hookBreaker(t *testing.T, b coretest.Bundle) (operator.BreakerState, bool) {
	t.Helper()
	open, err := b.Outbox.Breakers(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range open["hook"] {
		if s.Key == "" {
			return s, true
		}
	}
	return operator.BreakerState{}, false
}

// TestBreakerNoRowToProbeKeepsTheRealFailure (issue 40 item 4, issue 43
// item 2): a receiver answers 500 until its breaker opens and every row is
// dead (max_attempts 1): each probe round then finds no row to probe with.
// Such a round is not a failure: the breaker keeps showing the receiver's
// answer (a 500) as its last failure, its probe count does not grow, and
// the probe interval does not double (eight rounds of 300 ms come within
// seconds; doubled, they took 0.3 * 255 s).
//
// Checked with the mutation "a probe round without a row calls probeFailed
// with 'no row to probe with' and keeps the doubled interval" (the code
// before this test): the last failure read "no row to probe with" and the
// wait for eight rounds timed out.
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
	opened, ok := hookBreaker(t, b)
	if !ok {
		t.Fatal("no open breaker in the operator's view")
	}
	if !strings.Contains(opened.LastFailure, "500") {
		t.Fatalf("last failure %q as the breaker opened, want the receiver's 500", opened.LastFailure)
	}

	// Each round moves the next probe; eight of them, seen through the
	// operator's view.
	seen := map[time.Time]bool{opened.NextProbe: true}
	const rounds = 8
	var last operator.BreakerState
	testrelay.WaitFor(t, 30*time.Second, "eight probe rounds", func() bool {
		s, ok := hookBreaker(t, b)
		if !ok {
			t.Fatal("the breaker closed without a probe answered")
		}
		last = s
		seen[s.NextProbe] = true
		// Ends between rounds: a round under way counts its probe until
		// it gives it back.
		return len(seen) > rounds && s.State == operator.BreakerOpen
	})
	if strings.Contains(last.LastFailure, noRowToProbe) || !strings.Contains(last.LastFailure, "500") {
		t.Errorf("last failure %q after rounds without a row, want the receiver's 500 (%q)", last.LastFailure, opened.LastFailure)
	}
	if last.Probes != 0 {
		t.Errorf("%d probes counted, want none: no row was sent", last.Probes)
	}
	if n := rc.requests.Load(); n != rows {
		t.Errorf("%d requests to the receiver, want the %d deliveries and no probe", n, rows)
	}
}

// TestBreakerRetryAfterPauseSpendsNoProbe (issue 40 item 4): a receiver
// answers 429 with Retry-After: 7 until the breaker opens (probe interval
// 6 s), then 200. While the sink is paused no probe is spent on it, and the
// first request after the pause goes out when the pause ends (within a poll
// interval and a margin for a loaded machine), not at the next probe
// interval (12 s) nor after one doubled by a round that found no row
// (18 s); the breaker shows the 429 meanwhile; every row is then
// delivered.
//
// Checked with the mutations "probeSinks takes the probe of a paused sink,
// and a round without a row doubles the interval" (the code before this
// test: the first request came 11 s after the pause's end) and "probeSinks
// takes the probe of a paused sink, and breaker_return_probe.sql sets the
// next probe a probe interval on" (5 s after the pause's end).
func TestBreakerRetryAfterPauseSpendsNoProbe(t *testing.T) {
	b := coretest.Setup(t)
	rc := newFlakyReceiver(t, http.StatusTooManyRequests)
	const pause = 7 * time.Second
	rc.retry = "7"
	var (
		mu                          sync.Mutex
		first429, last429, first200 time.Time
	)
	rc.observe = func(status int) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		switch {
		case status == http.StatusTooManyRequests:
			last429 = now
			if first429.IsZero() {
				first429 = now
			}
		case status == http.StatusOK && first200.IsZero():
			first200 = now
		}
	}
	hook := webhookSink(t, rc.url())
	// Enqueued before the relay starts: one claim takes them all, and
	// their answers open the breaker before the pause holds the rest.
	const rows = 4
	b.EnqueueN(t, "hook", rows, nil)
	const poll = 100 * time.Millisecond
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: poll, Concurrency: rows,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: 5,
			CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: 2, ProbeInterval: 6 * time.Second,
				MaxProbeInterval: time.Minute}}}})
	signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })
	rc.mu.Lock()
	rc.status, rc.retry = http.StatusOK, ""
	rc.mu.Unlock()
	mu.Lock()
	earliest, pauseEnd := first429.Add(pause), last429.Add(pause)
	mu.Unlock()

	// Halfway through the pause: the breaker shows the receiver's answer.
	testrelay.WaitFor(t, 30*time.Second, "half the pause", func() bool { return time.Now().After(pauseEnd.Add(-pause / 2)) })
	if s, ok := hookBreaker(t, b); !ok || !strings.Contains(s.LastFailure, "429") {
		t.Errorf("breaker %+v (open %v) during the pause, want open with the receiver's 429", s, ok)
	}

	testrelay.WaitFor(t, 30*time.Second, "every row sent", func() bool { return b.StatusCounts(t)["sent"] == rows })
	mu.Lock()
	late := first200.Sub(pauseEnd)
	mu.Unlock()
	// A poll interval for the relay to see the pause end and take the
	// probe, a probe interval should the probe find the rows not yet due,
	// and a margin for a loaded machine.
	if most := 3 * time.Second; late > most || first200.Before(earliest.Add(-poll)) {
		t.Errorf("first request %s after the pause's end, want within %s", late.Round(time.Millisecond), most)
	}
	t.Logf("first request %s after the pause's end", late.Round(time.Millisecond))
}

// TestBreakerProbeRefusedBeforeSendingSettlesNothing (issue 40 item 6): a
// probe row that is dead-lettered before it is sent (its attempts spent)
// says nothing about the receiver: the breaker of a receiver answering 503
// stays open, keeps the 503 as its last failure, and the receiver gets no
// request; the row is dead.
//
// Checked with the mutation "settleBreaker closes the breaker on a probe
// refused before sending" (the code before this test): the breaker closed
// on the refusal's sink.Permanent, and every relay would have sent to the
// receiver still down.
func TestBreakerProbeRefusedBeforeSendingSettlesNothing(t *testing.T) {
	b := coretest.Setup(t)
	rc := newFlakyReceiver(t, http.StatusServiceUnavailable)
	hook := webhookSink(t, rc.url())
	const rows = 4
	b.EnqueueN(t, "hook", rows, nil)
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 50 * time.Millisecond, Concurrency: rows,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: 10,
			Backoff: relay.Backoff{Initial: time.Minute, Max: time.Minute},
			CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: 2, ProbeInterval: 300 * time.Millisecond,
				MaxProbeInterval: time.Minute}}}})
	signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })
	// Once no row is in flight, every row has spent its attempts and is
	// due: the next probe's row is refused at claim, before its sink is
	// called.
	testrelay.WaitFor(t, 30*time.Second, "no row in flight", func() bool { return b.StatusCounts(t)["in_progress"] == 0 })
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+b.Outbox.Schema()+
		".messages SET max_attempts = 1, attempts = 1, available_at = now() WHERE sink = 'hook'"); err != nil {
		t.Fatal(err)
	}
	before := rc.requests.Load()
	testrelay.WaitFor(t, 30*time.Second, "every row dead", func() bool { return b.StatusCounts(t)["dead"] == rows })
	s, open := hookBreaker(t, b)
	if !open || !strings.Contains(s.LastFailure, "503") {
		t.Errorf("breaker %+v (open %v) after refused probes, want open with the receiver's 503", s, open)
	}
	for _, c := range signals.Breaker.All() {
		if !c.Open {
			t.Errorf("breaker change %+v: a probe that was never sent closed it", c)
		}
	}
	if n := rc.requests.Load() - before; n != 0 {
		t.Errorf("%d requests to the receiver after the rows' attempts were spent, want none", n)
	}
}

package relay_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestOutageKillsNoRowBeforeTheBreakerActs (issue 40 item 7): with
// max_attempts 1 or 2, two rows for a receiver that is down (refusing
// connections, or answering 503), then up again: their attempts (2 or 4)
// are fewer than the breaker's consecutive_failures of 5, yet no row dies
// and both are delivered. The failures that open the breaker spend no
// row's last attempt; the rows wait for the probe, which closes the
// breaker once the receiver is back.
//
// Checked with the mutation "spareLastAttempt returns at once" (the code
// before this test): both rows died on their last attempt and the breaker
// never opened, in both cases.
func TestOutageKillsNoRowBeforeTheBreakerActs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		maxAttempts int
		down        int // the receiver's answer while down; 0 refuses connections
	}{
		{"max_attempts_1_refused", 1, 0},
		{"max_attempts_2_503", 2, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := coretest.Setup(t)
			rc := newFlakyReceiver(t, http.StatusOK)
			if tc.down == 0 {
				rc.refuse()
			} else {
				rc.answer(tc.down)
			}
			hook := webhookSink(t, rc.url())
			const rows = 2
			signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 100 * time.Millisecond, Concurrency: 2,
				Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: tc.maxAttempts,
					Backoff: relay.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond},
					CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: 5, ProbeInterval: 500 * time.Millisecond,
						MaxProbeInterval: time.Second}}}})
			b.EnqueueN(t, "hook", rows, func(i int, m *outboxd.Message) { m.DedupKey = fmt.Sprintf("m-%d", i) })
			signals.Breaker.Wait(t, 30*time.Second, "the breaker to open", func(all []relaysignal.BreakerChange) bool { return len(all) > 0 })
			if counts := b.StatusCounts(t); counts["dead"] != 0 {
				t.Errorf("rows %v once the breaker opened, want none dead", counts)
			}
			rc.answer(http.StatusOK)
			signals.Breaker.Wait(t, 30*time.Second, "the breaker to close", func(all []relaysignal.BreakerChange) bool { return !all[len(all)-1].Open })
			testrelay.WaitFor(t, 30*time.Second, "every row sent", func() bool { return b.StatusCounts(t)["sent"] == rows })
			if counts := b.StatusCounts(t); counts["dead"] != 0 {
				t.Errorf("rows %v after the outage, want every one sent", counts)
			}
		})
	}
}

// TestSparedLastAttemptsAreBounded (issue 40 item 7): a last attempt spared
// for the breaker counts toward the row's max_deferrals, so nothing loops
// forever. A receiver takes every message but one, which it answers 503
// each time (a proxy that times out on it alone): the breaker never opens,
// and that message dies once its max_deferrals (3) are spent, after its
// attempt and three spared ones (four requests), with the receiver's 503.
//
// Checked with the mutation "spareLastAttempt ignores max_deferrals": the
// message was retried without end and the wait for it to die timed out.
func TestSparedLastAttemptsAreBounded(t *testing.T) {
	b := coretest.Setup(t)
	const stuckID = "hook/stuck" // the webhook-id: the delivery id, sink/dedup key
	var stuckRequests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("webhook-id") == stuckID {
			stuckRequests.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	hook := webhookSink(t, srv.URL)
	const maxDeferrals = 3
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 100 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "hook", Type: "webhook", Sink: hook, MaxAttempts: 1, MaxDeferrals: maxDeferrals,
			Backoff: relay.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond},
			// More than the stuck message's requests: only the bound
			// ends its retries.
			CircuitBreaker: relay.CircuitBreaker{ConsecutiveFailures: 2 * (1 + maxDeferrals)}}}})
	stuck := b.EnqueueN(t, "hook", 1, func(_ int, m *outboxd.Message) { m.DedupKey = "stuck" })[0]
	const healthy = 20
	b.EnqueueN(t, "hook", healthy, func(i int, m *outboxd.Message) { m.DedupKey = fmt.Sprintf("ok-%d", i) })
	signals.WaitWritten(t, time.Minute, "hook", "dead", 1)
	signals.WaitWritten(t, time.Minute, "hook", "sent", healthy)
	msg, err := b.Outbox.Message(b.Ctx, b.Pool, stuck)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Status != "dead" || msg.Attempts != 1 || !strings.Contains(msg.LastError, "503") {
		t.Errorf("stuck message %s after %d attempts (last error %q), want dead after its one attempt with the 503", msg.Status, msg.Attempts, msg.LastError)
	}
	if n := stuckRequests.Load(); n != 1+maxDeferrals {
		t.Errorf("%d requests for the stuck message, want %d: its attempt and %d spared", n, 1+maxDeferrals, maxDeferrals)
	}
	if changes := signals.Breaker.All(); len(changes) != 0 {
		t.Errorf("breaker changes %v, want none: one stuck message is not an outage", changes)
	}
}

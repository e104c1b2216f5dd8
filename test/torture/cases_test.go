package torture

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/status"
)

// tortureCase is one of issue 40's eight defects as a fixed configuration: the
// run fails on the code before its fix (main at 7e06cf6) and passes once
// it is fixed.
type tortureCase struct {
	name   string
	config func() Config
	hooks  Hooks
	// extra checks what the generic invariants do not see in this case.
	extra func(*Outcome) []Violation
}

// quiet is a receiver without faults.
var quiet = Schedule{}

// tuned is a breaker with short probes, capped at maxProbe.
func tuned(failures int, probe, maxProbe time.Duration) Breaker {
	return Breaker{ConsecutiveFailures: failures, ProbeInterval: probe, MaxProbeInterval: maxProbe}
}

// slack is a Slack sink limited per channel.
func slack(name string, channels []string, rate int, per time.Duration, messages int) Sink {
	return Sink{Name: name, Kind: KindSlack, PerKey: true, Channels: channels, Rate: rate, Per: per, Burst: 1,
		MaxAttempts: 10, MaxInFlight: 8, Messages: messages, Breaker: Breaker{Default: true}}
}

// webhook is a webhook sink without a limit.
func webhook(name string, messages, maxAttempts int, b Breaker) Sink {
	return Sink{Name: name, Kind: KindWebhook, MaxAttempts: maxAttempts, MaxInFlight: 4, Messages: messages, Breaker: b}
}

var cases = []tortureCase{
	{
		// Defect 1 of issue 40: one relay, per_key 1 per 4 s (the 1 per 10 s,
		// faster), messages to one channel enqueued a second apart: the
		// second waited minutes, its available_at pushed one interval on at
		// every claim. DrainedWithinBound and RateLimitsHeld.
		name: "per_key_slow_rate",
		config: func() Config {
			return Config{Relays: 1, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: 3 * time.Second,
				Sinks: []Sink{slack("s0", []string{"CSLOW"}, 1, 4*time.Second, 3)}, Receivers: []Schedule{quiet}}
		},
	},
	{
		// Defect 1 of issue 40: two relays, per_key 1/s, the channel's first posts
		// answered 429 Retry-After 2 s: the next post came minutes later.
		// PauseEndsOnTime and DrainedWithinBound.
		name: "per_key_retry_after",
		config: func() Config {
			return Config{Relays: 2, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: time.Second,
				Sinks:     []Sink{slack("s0", []string{"CBUSY", "CCALM"}, 1, time.Second, 12)},
				Receivers: []Schedule{{Windows: []Window{{Kind: FaultThrottle, From: 0, To: 600 * time.Millisecond, RetryAfter: 2 * time.Second}}}}}
		},
	},
	{
		// Defect 2 of issue 40: two webhook sinks on one receiver answering 503,
		// max_attempts 3, the breaker's defaults: the digested sink's rows
		// all died, its digests never reported to the breaker.
		// NothingDeadThatWouldBeAccepted.
		name: "digest_breaker",
		config: func() Config {
			digested := webhook("s1", 10, 3, Breaker{Default: true})
			digested.Digest = &Digest{Window: 300 * time.Millisecond, MaxMessages: 3}
			return Config{Relays: 1, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: time.Second,
				Sinks:     []Sink{webhook("s0", 10, 3, Breaker{Default: true}), digested},
				Receivers: []Schedule{{Windows: []Window{{Kind: FaultDown, From: 0, To: 9 * time.Second}}}}}
		},
	},
	{
		// Defect 3 of issue 40: a webhook sink at 1 per 3 s whose receiver is down, then
		// heals: the probe took no permit, the next row followed it within
		// milliseconds. RateLimitsHeld.
		name: "probe_rate_limit",
		config: func() Config {
			s := webhook("s0", 6, 10, tuned(2, time.Second, 4*time.Second))
			s.Rate, s.Per, s.Burst = 1, 3*time.Second, 1
			return Config{Relays: 1, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: time.Second,
				Sinks: []Sink{s}, Receivers: []Schedule{{Windows: []Window{{Kind: FaultDown, From: 0, To: 6 * time.Second}}}}}
		},
	},
	{
		// Defect 4 of issue 40: Retry-After 5 s answered to four requests
		// in flight, opening the breaker (2 failures, probe 2 s); the issue
		// saw each probe in the pause find no row and double the interval.
		// PauseEndsOnTime. This case did not reproduce it on 7e06cf6 (the
		// first request after the pause came on time there too): it guards
		// the promise, it does not prove the fix.
		// PauseEndsOnTime.
		name: "retry_after_probe",
		config: func() Config {
			// The rows are enqueued at once, so that several requests in
			// flight get the 429 and open the breaker.
			return Config{Relays: 1, Lease: 3 * time.Second, Concurrency: 8,
				Sinks:     []Sink{webhook("s0", 5, 10, tuned(2, 2*time.Second, 5*time.Minute))},
				Receivers: []Schedule{{Windows: []Window{{Kind: FaultThrottle, From: 0, To: time.Second, RetryAfter: 5 * time.Second}}}}}
		},
	},
	{
		// Defect 5 of issue 40: one channel at per_key 1/s whose receiver
		// takes a second per post: every row of the key was handed back
		// every second. Measured: 23 updates per delivery on 7e06cf6, 7.5
		// on f76abbd, 2.6 on bfadf80 and on 71e99b5 (106 for 40, three
		// runs alike); 20 rows, to keep CI short: 44-46 for 20 on 6f472d8,
		// three runs side by side. The bound is guarantee 140's detail: at its share of
		// the slots (max_in_flight 8: one post at a time) a post takes a
		// second and more, so the key delivers slower than one a second
		// with a backlog, and each row may be handed back once and claimed
		// again: at most writesPerDelivery updates per delivery (a sent
		// row's finish deletes it), none per row beyond. Mutation: bound
		// at two per delivery (the claim and one write), the headline of
		// guarantee 140 for a key at its limit: 106 > 80 and 44 > 40 fail.
		name: "rows_written",
		config: func() Config {
			return Config{Relays: 1, Lease: 5 * time.Second, Concurrency: 8, EnqueueFor: 500 * time.Millisecond,
				Sinks:     []Sink{slack("s0", []string{"CSLOWRECV"}, 1, time.Second, 20)},
				Receivers: []Schedule{{Windows: []Window{{Kind: FaultSlow, From: 0, To: faultPhase, Delay: time.Second}}}}}
		},
		extra: func(o *Outcome) []Violation {
			if bound := int64(writesPerDelivery * len(o.Arrivals)); o.RowUpdates > bound {
				return []Violation{{Invariant: "rows_written", Detail: fmt.Sprintf("%d row updates for %d deliveries: more than the claim, a hand-back and the claim again each (%d)", o.RowUpdates, len(o.Arrivals), bound)}}
			}
			return nil
		},
	},
	{
		// Defect 6 of issue 40: while the receiver is down and the breaker open, the row
		// the next probe takes is past max_attempts, so it is refused
		// before it is sent: that closed the breaker, and both relays sent
		// to the down receiver again. Checked: at most probeRefusedRequests
		// requests in the 3 s after the row was made refusable.
		name: "probe_refused",
		config: func() Config {
			s := webhook("s0", 10, probeRefusedMaxAttempts, tuned(3, time.Second, 2*time.Second))
			s.MaxInFlight = 1
			return Config{Relays: 2, Lease: 3 * time.Second, Concurrency: 4, EnqueueFor: 500 * time.Millisecond,
				Sinks: []Sink{s}, Receivers: []Schedule{{Windows: []Window{{Kind: FaultDown, From: 0, To: faultPhase}}}}}
		},
		hooks: Hooks{AfterStart: refuseTheNextProbe},
		extra: func(o *Outcome) []Violation {
			from := o.Marks[probeRowRefusable]
			n := 0
			for _, a := range o.Arrivals {
				if a.At.After(from) && a.At.Before(from.Add(3*time.Second)) && a.Status == 503 {
					n++
				}
			}
			if n > probeRefusedRequests {
				return []Violation{{Invariant: "probe_refused", Detail: fmt.Sprintf("%d requests to the down receiver in the 3 s after the next probe's row was made refusable", n)}}
			}
			return nil
		},
	},
	{
		// Defect 7 of issue 40: three relays, SIGKILLed and SIGSTOPped, sending digests of
		// one key: two relays could each join a different subset of one
		// recorded digest and send both under its webhook-id.
		// OneMemberListPerDelivery, NothingLost.
		name: "digest_two_relays",
		config: func() Config {
			s := webhook("s0", 60, 10, Breaker{Default: true})
			s.Digest = &Digest{Window: 400 * time.Millisecond, MaxMessages: 4}
			return Config{Relays: 3, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: 8 * time.Second,
				Sinks: []Sink{s}, Receivers: []Schedule{{Windows: []Window{{Kind: FaultSlow, From: 0, To: 10 * time.Second, Delay: 300 * time.Millisecond}}}},
				Procs: []ProcEvent{{Kind: ProcKill, At: 2 * time.Second}, {Kind: ProcStop, At: 4 * time.Second, Relay: 1, For: 4 * time.Second}, {Kind: ProcKill, At: 7 * time.Second, Relay: 2}}}
		},
	},
	{
		// Defect 8 of issue 40: max_attempts 1 with the breaker's defaults, two relays, a
		// receiver down for 6 s while rows arrive: rows died before the
		// breaker opened. NothingDeadThatWouldBeAccepted. Passes three
		// runs of three on 71e99b5 (the fix, 417bd25); its mutation is the
		// defect: spareLastAttempt returning at once kills rows.
		name: "max_attempts_1_outage",
		config: func() Config {
			return Config{Relays: 2, Lease: 3 * time.Second, Concurrency: 8, EnqueueFor: 4 * time.Second,
				Sinks:     []Sink{webhook("s0", 20, 1, Breaker{Default: true})},
				Receivers: []Schedule{{Windows: []Window{{Kind: FaultDown, From: 0, To: 6 * time.Second}}}}}
		},
	},
}

// TestTortureCase runs each defect of issue 40 as a named case (see
// cases): each failed on the code before its fix, its product defect
// being the mutation; every fix has landed, so every case runs.
func TestTortureCase(t *testing.T) {
	if testing.Short() {
		t.Skip("torture: skipped in -short mode")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.config()
			c.Name = tc.name
			runAndCheck(t, c, tc.hooks, tc.extra)
		})
	}
}

// probeRefusedRequests bounds probe_refused's requests in the 3 s after
// the probe's row was made refusable: two probes (1 s, then 2 s apart) and
// a delivery in flight on each relay when the breaker opened. A breaker
// the refused row closes lets each relay send its 3 opening failures again.
const probeRefusedRequests = 4

// probeRefusedMaxAttempts is the max_attempts of probe_refused's sink,
// which refuseTheNextProbe gives the probe's row as its attempts.
const probeRefusedMaxAttempts = 3

// probeRowRefusable is the mark of the moment the next probe's row was
// made refusable.
const probeRowRefusable = "probe row refusable"

// refuseTheNextProbe waits until the breaker of s0 is open, then makes
// the row its next probe takes (the oldest open row, made due before
// every other) one past its max_attempts, so that the probe refuses it
// before sending, and waits until it is dead.
func refuseTheNextProbe(ctx context.Context, h *Harness) {
	t := h.T
	open := fmt.Sprintf(`SELECT count(*) FROM %s.destination_breakers WHERE sink = 's0'`, h.Schema)
	waitFor(ctx, t, "the breaker to open", func() bool {
		var n int
		return h.Pool.QueryRow(ctx, open).Scan(&n) == nil && n > 0
	})
	var key string
	err := h.Pool.QueryRow(ctx, fmt.Sprintf(`UPDATE %[1]s.messages SET attempts = $1, available_at = now() - interval '1 hour'
		WHERE id = (SELECT min(id) FROM %[1]s.messages WHERE sink = 's0' AND status IN ($2, $3)) RETURNING dedup_key`, h.Schema),
		probeRefusedMaxAttempts, status.Pending, status.Failed).Scan(&key)
	if err != nil {
		t.Fatalf("make the next probe's row refusable: %v", err)
	}
	h.ExpectDead[key] = true
	h.Marks[probeRowRefusable] = time.Now()
	waitFor(ctx, t, key+" to die", func() bool {
		var st status.Row
		return h.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s.messages_all WHERE dedup_key = $1`, h.Schema), key).Scan(&st) == nil && st == status.Dead
	})
}

// waitFor polls cond (the relays are other processes) until it holds.
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("gave up waiting for %s", what)
		}
		waitUntil(ctx, time.Now().Add(drainPoll))
	}
}

package torture

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/status"
)

// Violation is one broken promise of a run.
type Violation struct {
	// Invariant names the checker that found it (one of the functions
	// below).
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Check runs every invariant on o: what docs/guarantees.md promises about
// delivery, dead letters, duplicates, rate limits, ordering, the wait
// after an outage, the requests an outage costs, digests, Retry-After
// pauses and the rows written per delivery.
func Check(o *Outcome) []Violation {
	var vs []Violation
	for _, check := range []func(*Outcome) []Violation{
		NothingLost, NothingDeadThatWouldBeAccepted, NoDuplicateBeyondCrashWindows,
		RateLimitsHeld, OrderPerKey, DrainedWithinBound, BoundedRequestsWhileDown,
		OneMemberListPerDelivery, PauseEndsOnTime, RowWritesPerDelivery,
	} {
		vs = append(vs, check(o)...)
	}
	return vs
}

// maxDetails caps the violations one invariant reports, so that a run
// that breaks one badly stays readable.
const maxDetails = 10

// report collects one invariant's violations, at most maxDetails of
// them, then a count of the rest.
type report struct {
	name string
	vs   []Violation
	more int
}

func (r *report) add(format string, args ...any) {
	if len(r.vs) == maxDetails {
		r.more++
		return
	}
	r.vs = append(r.vs, Violation{Invariant: r.name, Detail: fmt.Sprintf(format, args...)})
}

func (r *report) done() []Violation {
	if r.more > 0 {
		r.vs = append(r.vs, Violation{Invariant: r.name, Detail: fmt.Sprintf("and %d more", r.more)})
	}
	return r.vs
}

// accepted returns, per dedup key, the requests the receivers took that
// carried it (alone or in a digest), in arrival order.
func accepted(o *Outcome) map[string][]Arrival {
	out := map[string][]Arrival{}
	for _, a := range o.Arrivals {
		if !a.Accepted() {
			continue
		}
		for _, m := range a.Members {
			out[m] = append(out[m], a)
		}
	}
	return out
}

// NothingLost (guarantees 1 and 47): every enqueued message has a row, no
// row is left open, and every row marked sent was carried by a request
// its receiver took: a digest member is sent only if the accepted post
// carried it.
func NothingLost(o *Outcome) []Violation {
	r := &report{name: "NothingLost"}
	want := 0
	for _, s := range o.Config.Sinks {
		want += s.Messages
	}
	if len(o.Rows) != want {
		r.add("%d rows, %d messages enqueued", len(o.Rows), want)
	}
	acc := accepted(o)
	for _, row := range o.Rows {
		switch row.Status {
		case status.Sent:
			if len(acc[row.DedupKey]) == 0 {
				r.add("%s is sent, but no request the receiver took carried it", row.DedupKey)
			}
		case status.Dead:
		default:
			r.add("%s left %s after %d attempts (last error %q)", row.DedupKey, row.Status, row.Attempts, row.LastError)
		}
	}
	return r.done()
}

// NothingDeadThatWouldBeAccepted (guarantees 10, 11 and issue 40 item 7):
// a row is dead only when its receiver refused it for good; outages,
// refusals and Retry-After answers dead-letter nothing, whatever
// max_attempts (the breaker is on in every draw). A poisoned message is
// dead, not sent. Crashes are not outages: a row whose last attempt a
// relay SIGKILLed or SIGSTOPped past its lease abandoned, its attempts
// then used up, is dead by design
// (attempts count at claim, so a message that kills its relays stops;
// docs/design.md, "after max_attempts abandoned claims"), and excused when
// a relay crashed in the run (seed 305: max_attempts 1, its relay stopped
// for longer than the lease mid-delivery).
func NothingDeadThatWouldBeAccepted(o *Outcome) []Violation {
	r := &report{name: "NothingDeadThatWouldBeAccepted"}
	for _, row := range o.Rows {
		switch {
		case row.Status == status.Dead && len(o.Procs) > 0 && strings.Contains(row.LastError, abandonedAttempts):
		case row.Status == status.Dead && !row.Poisoned && !o.ExpectDead[row.DedupKey]:
			r.add("%s (sink %s) is dead after %d attempts, last error %q: its receiver would have taken it", row.DedupKey, row.Sink, row.Attempts, row.LastError)
		case row.Poisoned && row.Status == status.Sent:
			r.add("%s is sent, but its receiver refuses it for good", row.DedupKey)
		}
	}
	return r.done()
}

// abandonedAttempts is in the last error of a row whose attempts ran out
// with one its relay abandoned (core/relay's refuse).
const abandonedAttempts = "was abandoned without a result (its relay died or overran the lease)"

// crashedNear reports whether relay was SIGKILLed or SIGSTOPped within d
// of at: a delivery whose outcome the crash may have lost, or one the
// stopped relay sent after its lease ran out.
func crashedNear(o *Outcome, relay string, at time.Time, d time.Duration) bool {
	for _, p := range o.Procs {
		if p.Relay == relay && !p.Until.Before(at.Add(-d)) && !p.At.After(at.Add(d)) {
			return true
		}
	}
	return false
}

// NoDuplicateBeyondCrashWindows (guarantees 3 and 4): a message the
// receiver took twice (under one webhook-id or in two digests) is only
// excused by the documented windows: its relay SIGKILLed or SIGSTOPped
// within a lease of a post (between the post and the finish, or sending
// after its lease), or an answer its sender had given up on.
func NoDuplicateBeyondCrashWindows(o *Outcome) []Violation {
	r := &report{name: "NoDuplicateBeyondCrashWindows"}
	lease := o.Config.Lease
	for key, as := range accepted(o) {
		for i := 1; i < len(as); i++ {
			prev, a := as[i-1], as[i]
			if prev.Late || crashedNear(o, prev.Relay, prev.At, lease) || crashedNear(o, a.Relay, a.At, lease) {
				continue
			}
			r.add("%s taken twice: as %s from %s at +%s and as %s from %s at +%s, no crash near either",
				key, prev.ID, prev.Relay, prev.At.Sub(o.Start).Round(time.Millisecond), a.ID, a.Relay, a.At.Sub(o.Start).Round(time.Millisecond))
		}
	}
	return r.done()
}

// rateJitter is the tolerance on the spacing of arrivals: a request may
// reach the receiver later than it started (a busy machine), bringing it
// closer to the next. A quarter of the interval, at most this.
const rateJitter = 300 * time.Millisecond

// RateLimitsHeld (guarantees 38, 41, 53 and issue 40 items 1 and 3): every
// request counts against its sink's limit (per rate key with per_key),
// probes and digests included. The limit is a GCRA of interval
// Per/Rate and Burst: any Burst+1 consecutive requests of a key span at
// least one interval (so a window of Per holds at most Rate+Burst), less
// the arrival jitter. Requests of a relay stopped by SIGSTOP within a
// lease are left out: it may send what it held a permit for long ago.
func RateLimitsHeld(o *Outcome) []Violation {
	r := &report{name: "RateLimitsHeld"}
	for _, s := range o.Config.Sinks {
		if s.Rate == 0 {
			continue
		}
		interval := s.Interval()
		tolerance := interval - min(interval/4, rateJitter)
		byKey := map[string][]Arrival{}
		for _, a := range o.Arrivals {
			if a.Sink != s.Name || crashedNear(o, a.Relay, a.At, o.Config.Lease) {
				continue
			}
			key := s.Name
			if s.PerKey {
				key = a.Key
			}
			byKey[key] = append(byKey[key], a)
		}
		for key, as := range byKey {
			for i := 0; i+s.Burst < len(as); i++ {
				first, last := as[i], as[i+s.Burst]
				if gap := last.At.Sub(first.At); gap < tolerance {
					r.add("sink %s key %s: %d requests within %s (at +%s, %s from %s then %s from %s), limit %d per %s burst %d",
						s.Name, key, s.Burst+1, gap.Round(time.Millisecond), first.At.Sub(o.Start).Round(time.Millisecond),
						first.ID, first.Relay, last.ID, last.Relay, s.Rate, s.Per, s.Burst)
				}
			}
		}
	}
	return r.done()
}

// OrderPerKey (guarantee 9): the messages of an ordering key are first
// taken by the receiver in id order.
func OrderPerKey(o *Outcome) []Violation {
	r := &report{name: "OrderPerKey"}
	acc := accepted(o)
	last := map[string]Arrival{}
	lastKey := map[string]string{}
	for _, row := range o.Rows { // in id order
		if row.OrderingKey == "" || row.Status != status.Sent || len(acc[row.DedupKey]) == 0 {
			continue
		}
		first := acc[row.DedupKey][0]
		if prev, ok := last[row.OrderingKey]; ok && first.Seq < prev.Seq {
			r.add("ordering key %s: %s arrived before the earlier %s", row.OrderingKey, row.DedupKey, lastKey[row.OrderingKey])
		}
		last[row.OrderingKey], lastKey[row.OrderingKey] = first, row.DedupKey
	}
	return r.done()
}

// drainMargin is the part of DrainBound that no setting explains: a busy
// machine's scheduling, claims and polls.
const drainMargin = 20 * time.Second

// DrainBound is the stated bound on how long after every receiver heals
// (and every relay runs again) a row may still wait: the longest of the
// sinks' next probe (the breaker's interval in force, doubled through
// the outage from its first window), the longest Retry-After answered, the
// backlog of the busiest rate key at its limit and the digest window;
// plus a lease (rows of a killed relay), the longest backoff twice, and
// drainMargin.
func DrainBound(c Config) time.Duration {
	var longest time.Duration
	for _, s := range c.Sinks {
		sched := c.Receivers[s.Receiver]
		var wait time.Duration
		if len(sched.Windows) > 0 {
			_, probe, maxProbe := s.Breaker.Settings()
			p := probe
			for t := sched.Windows[0].From + p; t < faultPhase; t += p {
				p = min(2*p, maxProbe)
			}
			wait += p
		}
		wait += sched.LongestRetryAfter()
		if s.Rate > 0 {
			keys := max(1, len(s.Channels))
			wait += time.Duration((s.Messages+keys-1)/keys) * s.Interval()
		}
		if s.Digest != nil {
			wait += s.Digest.Window
		}
		longest = max(longest, wait)
	}
	return longest + c.Lease + 2*backoffMax + drainMargin
}

// DrainedWithinBound (guarantee 11 and issue 40 item 3): no row waits
// longer than DrainBound after its receiver heals.
func DrainedWithinBound(o *Outcome) []Violation {
	r := &report{name: "DrainedWithinBound"}
	if o.DrainedAt.IsZero() {
		r.add("rows still open %s after the receivers healed; the first:\n%s", DrainBound(o.Config), o.Open)
	}
	return r.done()
}

// relaysDuring counts the relays that ran at some time from from to to.
func relaysDuring(o *Outcome, from, to time.Time) int {
	n := 0
	for _, l := range o.Lived {
		if l[0].Before(to) && (l[1].IsZero() || l[1].After(from)) {
			n++
		}
	}
	return n
}

// probeMargin is the probes a down window may see beyond one per probe
// interval: the one at its end, and one racing the opening.
const probeMargin = 2

// BoundedRequestsWhileDown (guarantees 11, 12 and 17, and issue 40 items 2
// and 6): a receiver answering 503 gets, per breaker (the sink's, or each
// rate key's), at most the breaker-opening failures and the deliveries in
// flight on each relay, then about one probe per probe interval.
func BoundedRequestsWhileDown(o *Outcome) []Violation {
	r := &report{name: "BoundedRequestsWhileDown"}
	for _, s := range o.Config.Sinks {
		failures, probe, _ := s.Breaker.Settings()
		inFlight := min(s.MaxInFlight, o.Config.Concurrency)
		breakers := max(1, len(s.Channels))
		for _, w := range o.Config.Receivers[s.Receiver].Windows {
			if w.Kind != FaultDown {
				continue
			}
			from, to := o.Start.Add(w.From), o.Start.Add(w.To)
			n := 0
			for _, a := range o.Arrivals {
				if a.Sink == s.Name && a.Status == 503 && !a.At.Before(from) && a.At.Before(to) {
					n++
				}
			}
			relays := relaysDuring(o, from, to)
			bound := breakers * (relays*(failures+inFlight) + int((w.To-w.From)/probe) + probeMargin)
			if n > bound {
				r.add("sink %s: %d requests to its receiver while down for %s (%s..%s), bound %d (%d breakers, %d relays x (%d failures + %d in flight) + one probe per %s + %d)",
					s.Name, n, w.To-w.From, w.From, w.To, bound, breakers, relays, failures, inFlight, probe, probeMargin)
			}
		}
	}
	return r.done()
}

// OneMemberListPerDelivery (guarantee 47 and issue 40 item 6): a digest's
// delivery id names one member list forever: every request under it
// carries the same members, in the same order.
func OneMemberListPerDelivery(o *Outcome) []Violation {
	r := &report{name: "OneMemberListPerDelivery"}
	lists := map[string][]string{}
	for _, a := range o.Arrivals {
		if !strings.Contains(a.ID, "/digest-") {
			continue
		}
		if prev, ok := lists[a.ID]; ok && !slices.Equal(prev, a.Members) {
			r.add("%s carried %v, then %v (from %s at +%s)", a.ID, prev, a.Members, a.Relay, a.At.Sub(o.Start).Round(time.Millisecond))
			continue
		}
		lists[a.ID] = a.Members
	}
	return r.done()
}

// pauseMargin is how late after a Retry-After pause (and the allowances
// PauseEndsOnTime names) the next request may come on a busy machine.
const pauseMargin = 3 * time.Second

// PauseEndsOnTime (guarantees 18, 39 and issue 40 items 1 and 4): after a
// 429 with a Retry-After of a second or more, the receiver's (the rate
// key's) next request comes when the pause ends: within the longer of
// the pause and the breaker's first probe interval, plus a poll interval,
// the sink's interval, its longest backoff and pauseMargin. A relay crash
// in between excuses it.
func PauseEndsOnTime(o *Outcome) []Violation {
	r := &report{name: "PauseEndsOnTime"}
	for _, s := range o.Config.Sinks {
		_, probe, _ := s.Breaker.Settings()
		var series []Arrival
		for _, a := range o.Arrivals {
			if a.Sink == s.Name {
				series = append(series, a)
			}
		}
		keyOf := func(a Arrival) string {
			if s.PerKey {
				return a.Key
			}
			return s.Name
		}
		for i, a := range series {
			if a.Status != 429 || a.RetryAfter < time.Second {
				continue
			}
			allowed := max(a.RetryAfter, probe) + pollInterval + s.Interval() + backoffMax + pauseMargin
			for _, next := range series[i+1:] {
				if keyOf(next) != keyOf(a) {
					continue
				}
				if late := next.At.Sub(a.At); late > allowed && !crashedBetween(o, a.At, next.At) {
					r.add("sink %s key %s: 429 with Retry-After %s at +%s, next request %s later (allowed %s)",
						s.Name, keyOf(a), a.RetryAfter, a.At.Sub(o.Start).Round(time.Millisecond), late.Round(time.Millisecond), allowed)
				}
				break
			}
		}
	}
	return r.done()
}

// crashedBetween reports whether any relay crash overlapped from..to.
func crashedBetween(o *Outcome, from, to time.Time) bool {
	for _, p := range o.Procs {
		if !p.Until.Before(from) && !p.At.After(to) {
			return true
		}
	}
	return false
}

// Row writes a delivery may cost (guarantee 140 and its detail, issue 40
// item 5): the claim and the finish, and one more on average (a key
// slower than one a second with a backlog has each row handed back about
// once, then claimed again); and per row the hand-backs of crashes and of
// spared last attempts, which no receiver counts.
const (
	writesPerDelivery = 3
	writesPerRow      = 4
)

// RowWritesPerDelivery (guarantee 140, issue 40 item 5): rows that wait
// are left alone. The messages table's updates stay within
// writesPerDelivery per delivery (a request the receivers got, or an
// attempt whose connection was refused) plus writesPerRow per row, under
// any limit.
func RowWritesPerDelivery(o *Outcome) []Violation {
	r := &report{name: "RowWritesPerDelivery"}
	deliveries := int64(len(o.Arrivals)) + o.RefusedAttempts
	if bound := writesPerDelivery*deliveries + int64(writesPerRow*len(o.Rows)); o.RowUpdates > bound {
		r.add("%d row updates for %d requests, %d refused attempts and %d rows (%.1f per delivery), bound %d",
			o.RowUpdates, len(o.Arrivals), o.RefusedAttempts, len(o.Rows), float64(o.RowUpdates)/float64(max(1, deliveries)), bound)
	}
	return r.done()
}

package relay

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/outboxd/outboxd/core/internal/ratelimit"
)

// The reservation rule, one for a sink's limit and a per-key limit, for
// rows, batches and digests alike (issue 40 item 3): a reservation takes
// only the permits that start within permitHorizon, so a permit is never
// spent on a row that is handed back, and the limit's schedule never runs
// ahead of the rows that use it. A row without a permit goes back due
// when its permit comes within reach (ratelimit.Grant.Due), not sooner:
// claimed sooner, it would only be handed back again.

// permitHorizon is the "ahead" bound of every reservation: how long a
// claimed row may wait in the relay for its permit. It is the hold window
// (beyond it the row's lease is at risk), and no more than
// rateReserveHorizon, so that one relay does not take the permits of the
// seconds to come that the other relays could use.
func (r *Relay) permitHorizon() time.Duration {
	return min(r.holdWindow(), rateReserveHorizon)
}

// sinkLimit is s's limit as the limiter takes it.
func sinkLimit(s SinkConfig) ratelimit.KeyLimit {
	return ratelimit.KeyLimit{Interval: s.RateLimit.Interval(), Burst: s.RateLimit.Burst}
}

// admission is what the reservation rule gave a claim's deliveries, in
// their order: a delivery with a permit has wait[i] >= 0, one without has
// wait[i] < 0 and is handed back, claimable again due[i] from now, for
// cause[i]; every[i] is then its limit's interval when a permit is what
// it lacks (0 otherwise).
type admission struct {
	wait, due, every []time.Duration
	cause            []error
	// blocked says every key of the reservation has no permit left within
	// the horizon, or no slot (see keyRoom): another claim now would only
	// hand its rows back. unblocked is when the first of them, limited by
	// its permits, may take one again (0: none is); full says one of them
	// has its permit but is at its share of the slots, which a delivery's
	// end frees. A key at its share whose next permit is still to come is
	// not full: a delivery's end before that permit would have the loop
	// claim one of its rows only to hand it back.
	blocked, full bool
	unblocked     time.Duration
	// paced says the key unblocked first waits for its limit's pace (its
	// next permit within an interval), not for a pause.
	paced bool
	// keys is how many rate keys the deliveries have (0: one limit for
	// the sink).
	keys int
	// left is how many more deliveries the key of the claim with the
	// fewest may start on this relay, those admitted counted (see
	// keyRoom): a loop whose claims find one key claims no more rows than
	// that.
	left int
}

// firstDue is how soon the first row handed back comes due (0: none
// was): a loop that claimed fewer rows than it asked for idles no longer.
func (a admission) firstDue() time.Duration {
	first := time.Duration(0)
	for i, w := range a.wait {
		if w < 0 && a.due[i] > 0 && (first == 0 || a.due[i] < first) {
			first = a.due[i]
		}
	}
	return first
}

// refused is the admission of n deliveries none of which may start: each
// is handed back due from now, for cause.
func refused(n int, due time.Duration, cause error) admission {
	a := admission{wait: make([]time.Duration, n), due: make([]time.Duration, n), every: make([]time.Duration, n), cause: make([]error, n)}
	for i := range n {
		a.wait[i], a.due[i], a.cause[i] = -1, due, cause
	}
	return a
}

// admitSink reserves permits of s's limit for n deliveries: the first
// ones start after their wait, the others are refused (see admission).
func (r *Relay) admitSink(ctx context.Context, s SinkConfig, n int) admission {
	hold := r.permitHorizon()
	g, err := r.limiter.Reserve(ctx, s.Name, sinkLimit(s), n, hold)
	switch {
	case err != nil:
		r.logger.Warn("outbox: rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
		return refused(n, claimRetryDelay, err)
	case g.Paused > 0:
		// Paused between the claim and the reservation: no relay claims
		// the rows while the database says so, and a resume makes them
		// claimable at once.
		return refused(n, 0, fmt.Errorf("sink %q is paused (by a Retry-After or by hand)", s.Name))
	}
	a := refused(n, 0, fmt.Errorf("waiting for a permit of sink %q (rate_limit)", s.Name))
	ok := r.startable(g.Waits)
	for i := range n {
		switch {
		case i < ok:
			a.wait[i], a.cause[i] = g.Waits[i], nil
		case i < len(g.Waits):
			a.due[i] = g.Waits[i] - hold
		default:
			a.due[i], a.every[i] = g.Due(i-len(g.Waits), hold), g.Interval
		}
	}
	a.blocked, a.unblocked = len(g.Waits) < n, g.Due(0, hold)
	return a
}

// keyPaused says why a delivery of key, a rate key of s, whose permit
// has come must not start: a Retry-After this relay was answered for the
// key pauses it, and a permit reserved before the 429 came back would
// post inside the pause (the key's other relays reserve after it). It
// returns when the delivery should come back, and nil when it may start.
func (r *Relay) keyPaused(s SinkConfig, key string) (time.Duration, error) {
	if s.RateLimit == nil || !s.RateLimit.PerKey || key == "" {
		return 0, nil
	}
	d := r.limiter.KeyPausedFor(s.Name, key)
	if d <= 0 {
		return 0, nil
	}
	return max(0, d-r.permitHorizon()), fmt.Errorf("rate key %q of sink %q is paused by a Retry-After", key, s.Name)
}

// startable is how many of waits (ascending) start within the hold
// window. The reservation rule grants none beyond the horizon, but two
// relays creating a key's limit at once both count from now (see
// reserve_key_permits.sql), and a row whose permit starts past the hold
// window would wait in the relay past its lease's share: it goes back,
// due when its permit comes within the horizon.
func (r *Relay) startable(waits []time.Duration) int {
	hold := r.holdWindow()
	for i, w := range waits {
		if w > hold {
			return i
		}
	}
	return len(waits)
}

// keyRoom is how many deliveries of a rate key may start now (a share of
// the slots, see keysInFlight), taken by take, given back by give for
// those that got no permit; full says none may. Digests, whose sends the
// digester paces, take no slots: noKeyRoom.
type keyRoom interface {
	take(key string, want int) int
	give(key string)
	// left is how many more deliveries of key may start (0: key is at its
	// share of the slots).
	left(key string) int
}

// noKeyRoom lets every delivery of every key start.
type noKeyRoom struct{}

func (noKeyRoom) take(_ string, want int) int { return want }
func (noKeyRoom) give(string)                 {}
func (noKeyRoom) left(string) int             { return math.MaxInt }

// sinkKeyRoom is s's share of the slots per key on this relay.
type sinkKeyRoom struct {
	flight *keysInFlight
	sink   string
	most   int
}

func (k sinkKeyRoom) take(key string, want int) int { return k.flight.take(k.sink, key, want, k.most) }
func (k sinkKeyRoom) give(key string)               { k.flight.give(k.sink, key) }
func (k sinkKeyRoom) left(key string) int           { return k.flight.left(k.sink, key, k.most) }

// admitByKey reserves permits of s's per-key limit for deliveries whose
// rate keys are keys (in their order; one reservation statement for all
// of them, keys locked in sorted order): each key's first deliveries, as
// many as room lets start and its permits within the horizon allow,
// start after their wait; the others are refused (see admission).
func (r *Relay) admitByKey(ctx context.Context, s SinkConfig, keys []string, room keyRoom) admission {
	hold := r.permitHorizon()
	wanted := map[string]int{}
	for _, k := range keys {
		wanted[k]++
	}
	if d := r.limiter.PausedFor(s.Name); d > 0 {
		// Paused by hand: no relay claims the rows while it lasts, and a
		// resume makes them claimable at once. No permit is taken.
		return refused(len(keys), 0, fmt.Errorf("sink %q is paused (by a Retry-After or by hand)", s.Name))
	}
	sorted := slices.Sorted(maps.Keys(wanted))
	limits := keyLimits(ctx, s, sorted)
	counts := make([]int, len(sorted))
	for i, k := range sorted {
		counts[i] = room.take(k, wanted[k])
	}
	grants, err := r.limiter.ReserveKeys(ctx, s.Name, sorted, counts, limits, hold)
	if err != nil {
		r.logger.Warn("outbox: per-key rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
		for i, k := range sorted {
			for range counts[i] {
				room.give(k)
			}
		}
		return refused(len(keys), claimRetryDelay, err)
	}
	roomOf, okOf := make(map[string]int, len(sorted)), make(map[string]int, len(sorted))
	for i, k := range sorted {
		roomOf[k], okOf[k] = counts[i], r.startable(grants[k].Waits)
		// Slots taken for deliveries that may not start go back at once.
		for range counts[i] - okOf[k] {
			room.give(k)
		}
	}
	a := refused(len(keys), 0, nil)
	a.blocked, a.keys = len(sorted) > 0, len(sorted)
	nth := make(map[string]int, len(sorted))
	for i, k := range keys {
		g, j := grants[k], nth[k]
		nth[k]++
		switch {
		case j < okOf[k]:
			a.wait[i] = g.Waits[j]
		case j < len(g.Waits):
			a.due[i] = g.Waits[j] - hold
			a.cause[i] = fmt.Errorf("the permit of rate key %q starts beyond the hold window", k)
		case j < roomOf[k]:
			a.due[i], a.every[i] = g.Due(j-len(g.Waits), hold), g.Interval
			a.cause[i] = fmt.Errorf("waiting for a permit of rate key %q (rate_limit.per_key)", k)
		default:
			a.due[i] = max(keyFullRecheck, g.Due(j-len(g.Waits), hold))
			a.cause[i] = fmt.Errorf("rate key %q has its share of the slots under way on this relay", k)
		}
	}
	for i, k := range sorted {
		next, left := grants[k].Due(0, hold), room.left(k)
		full := left == 0
		if i == 0 || left < a.left {
			a.left = left
		}
		if next == 0 && !full {
			a.blocked = false
		}
		a.full = a.full || (full && next == 0)
		if next > 0 && (a.unblocked == 0 || next < a.unblocked) {
			a.unblocked, a.paced = next, next <= grants[k].Interval
		}
	}
	return a
}

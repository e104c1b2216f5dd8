package relay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/outboxd/outboxd/core/internal/ratelimit"
	"github.com/outboxd/outboxd/core/internal/slots"
	"github.com/outboxd/outboxd/core/sink"
)

// A sink whose rate limit holds per rate key (RateLimit.PerKey)
// claims in sinkLoop like any throttled sink, but a row's key (Slack: its
// channel) is only known once the row is claimed and the sink names it. So
// dispatchByKey groups the claimed rows by key, reserves for each key the
// permits it can use within rateReserveHorizon (one statement for all
// keys, so relays share each key's permits), starts those rows and hands
// the others back without spending their attempt, due when their key's
// turn should come. Rows of other keys never wait behind a busy key. Each
// key is limited by the sink's limit, or by its own when the sink gives
// it one (sink.KeyRateLimiter: a tenant's destination's rate_limit).

// keyedRows are the claimed rows of one rate key, in claim order.
type keyedRows struct {
	key  string
	rows []*claimedRow
}

// dispatchByKey starts the rows whose key has a permit soon and hands the
// others back; it returns how soon the first row handed back comes due
// (0 when none was).
func (r *Relay) dispatchByKey(ctx, deliverCtx context.Context, s SinkConfig, rows []*claimedRow, free *slots.Slots) time.Duration {
	groups := r.holdOpenKeys(ctx, s, r.groupByKey(deliverCtx, s, rows))
	if len(groups) == 0 {
		return 0
	}
	keys := make([]string, len(groups))
	for i, g := range groups {
		keys[i] = g.key
	}
	limits := keyLimits(ctx, s, keys)
	counts := make([]int, len(groups))
	most := keySlots(s)
	for i, g := range groups {
		// Only what the key's share of the slots lets start is reserved;
		// its other rows wait in the table (see keyShareOfSlots).
		counts[i] = r.keyFlight.take(s.Name, g.key, min(len(g.rows), permitsWithinHorizon(limits[i])), most)
	}
	waits, err := r.limiter.ReserveKeys(ctx, s.Name, keys, counts, limits)
	if err != nil {
		// Without permits we must not deliver: hand the rows back.
		r.logger.Warn("outbox: per-key rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
		for i, g := range groups {
			for range counts[i] {
				r.keyFlight.give(s.Name, g.key)
			}
			for _, row := range g.rows {
				r.release(row, 0, err)
			}
		}
		sleep(ctx, claimRetryDelay)
		return 0
	}
	// Beyond the hold window the row's lease would be at risk, and it goes
	// back to the table.
	maxHold := r.holdWindow()
	nextDue := time.Duration(0)
	for k, g := range groups {
		w, interval := waits[g.key], limits[k].Interval
		for i, row := range g.rows {
			if i < len(w) && w[i] <= maxHold {
				free.Take()
				key := g.key
				r.start(deliverCtx, row, w[i], func() { free.Give(); r.keyFlight.give(s.Name, key) })
				continue
			}
			if i < len(w) {
				// Reserved for this row but not started: the key's slot
				// goes back (its permit is spent).
				r.keyFlight.give(s.Name, g.key)
			}
			due := keyFullRecheck
			cause := fmt.Errorf("waiting for a permit of rate key %q (rate_limit.per_key)", g.key)
			switch {
			case len(w) == 0:
				cause = fmt.Errorf("rate key %q has %d deliveries under way on this relay, its share of the slots", g.key, most)
			case i < len(w):
				due = w[i]
			default:
				// Due when the key's permits should reach it.
				due = w[len(w)-1] + time.Duration(i-len(w)+1)*interval
			}
			r.release(row, due, cause)
			if nextDue == 0 || due < nextDue {
				nextDue = due
			}
		}
	}
	return nextDue
}

// permitsWithinHorizon is how many permits of l one reservation takes
// for a key: those it can use within rateReserveHorizon, at least one.
func permitsWithinHorizon(l ratelimit.KeyLimit) int {
	return max(1, int(rateReserveHorizon/l.Interval))
}

// keyLimits are the limits of keys of s, in order: each key's own when
// the sink gives it one (sink.KeyRateLimiter), else the sink's.
func keyLimits(ctx context.Context, s SinkConfig, keys []string) []ratelimit.KeyLimit {
	rl := *s.RateLimit
	own, _ := s.Sink.(sink.KeyRateLimiter)
	limits := make([]ratelimit.KeyLimit, len(keys))
	for i, key := range keys {
		limits[i] = ratelimit.KeyLimit{Interval: rl.Interval(), Burst: rl.Burst}
		if own == nil {
			continue
		}
		if l, ok := keyRateLimit(ctx, own, key); ok {
			limits[i] = l
		}
	}
	return limits
}

// minKeyInterval is the finest spacing of a key's own limit that the
// database's intervals (microseconds) can hold.
const minKeyInterval = time.Microsecond

// keyRateLimit asks the sink for key's own limit, as a KeyLimit; a limit
// out of range, or a panic (turned into no answer, as rateKeyOf
// does), leaves the key to the sink's limit.
func keyRateLimit(ctx context.Context, k sink.KeyRateLimiter, key string) (l ratelimit.KeyLimit, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	rl, ok := k.KeyRateLimit(ctx, key)
	if !ok || rl.Rate <= 0 || rl.Per <= 0 || rl.Burst < 0 || rl.Interval() < minKeyInterval {
		return ratelimit.KeyLimit{}, false
	}
	return ratelimit.KeyLimit{Interval: rl.Interval(), Burst: max(rl.Burst, DefaultRateBurst)}, true
}

// groupByKey prepares each row (see Stage), asks the sink for its
// rate key and groups the rows by key, keys sorted (the order
// relays lock them in). A row the stage refuses, or whose key the sink
// cannot name, gets that error as its outcome.
func (r *Relay) groupByKey(ctx context.Context, s SinkConfig, rows []*claimedRow) []keyedRows {
	keyer := s.Sink.(sink.RateKeyer) // checked by SinkConfig.withDefaults
	index := map[string]int{}
	var groups []keyedRows
	for _, row := range rows {
		row.setMaxAttempts(s)
		if err := r.prepare(row.deadline.context(ctx), row); err != nil {
			r.finish(ctx, row, s, nil, 0, err)
			continue
		}
		key, err := rateKeyOf(keyer, &row.Delivery)
		if err != nil {
			r.finish(ctx, row, s, nil, 0, err)
			continue
		}
		i, seen := index[key]
		if !seen {
			i = len(groups)
			index[key] = i
			groups = append(groups, keyedRows{key: key})
		}
		row.rateKey = key
		groups[i].rows = append(groups[i].rows, row)
	}
	slices.SortFunc(groups, func(a, b keyedRows) int { return cmp.Compare(a.key, b.key) })
	return groups
}

// rateKeyOf asks the sink for d's rate key, turning a panic into an
// error as callSink does; its error is the delivery's outcome.
func rateKeyOf(k sink.RateKeyer, d *sink.Delivery) (key string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("naming the rate key: %w", err)
		}
	}()
	return k.RateKey(d)
}

// untilDue is how long a loop idles when rows it handed back come due in
// due (0: none did): no longer than that, nor than poll.
func untilDue(poll, due time.Duration) time.Duration {
	if due > 0 {
		return min(poll, due)
	}
	return poll
}

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
// permits it can use within the horizon (admitByKey: one statement for
// all keys, so relays share each key's permits), starts those rows and
// hands the others back without spending their attempt, due when their
// key's turn should come. Rows of other keys never wait behind a busy
// key. Each key is limited by the sink's limit, or by its own when the
// sink's configuration gives it one (SinkConfig.KeyRateLimit: a tenant's
// destination's rate_limit). Since the claim cannot tell keys apart, keyedClaims sizes
// and paces the loop's claims so that a key at its limit, or at its share
// of the slots, does not have its rows claimed only to be handed back
// (issue 40 item 5: a key at its share had hundreds of rows claimed and
// handed back every second, 1,850 row writes per delivery).

// keyedRows are the claimed rows of one rate key, in claim order.
type keyedRows struct {
	key  string
	rows []*claimedRow
}

// keyedDispatch is what dispatchByKey did with a claim: how many rows it
// started and handed back, and the admission of the rows it reserved
// for.
type keyedDispatch struct {
	started, handedBack int
	// spreadTenants are the rows handed back spread over their tenant's
	// coming slots (see tenantPace).
	spreadTenants int
	admission
}

// dispatchByKey starts the rows whose key has a permit and a slot now and
// hands the others back (see admitByKey).
func (r *Relay) dispatchByKey(ctx, deliverCtx context.Context, s SinkConfig, rows []*claimedRow, free *slots.Slots, spread *keySpread) keyedDispatch {
	groups := r.holdOpenKeys(ctx, s, r.groupByKey(deliverCtx, s, rows))
	var queue []*claimedRow
	var keys []string
	for _, g := range groups {
		for _, row := range g.rows {
			queue, keys = append(queue, row), append(keys, g.key)
		}
	}
	if len(queue) == 0 {
		return keyedDispatch{}
	}
	// A slot freed before the room is counted below is counted in it: the
	// loop, waiting for a blocked key's slot (see keyedClaims), must not
	// take it for one freed since and claim a row only to hand it back.
	free.ForgetFreed()
	room := r.keyRoomOf(ctx, s, keys)
	d := keyedDispatch{admission: r.admitByKey(ctx, s, keys, room)}
	for i, row := range queue {
		if d.wait[i] < 0 {
			if d.every[i] > 0 {
				d.due[i] = spread.after(keys[i], d.due[i], d.every[i])
			} else if due, ok := spread.tenants.after(room, keys[i], d.due[i]); ok {
				d.due[i] = due
				d.spreadTenants++
			}
			r.release(row, d.due[i], d.cause[i])
			d.handedBack++
			continue
		}
		free.Take()
		key := keys[i]
		// The key's slot is given back before the loop's, whose Freed
		// wakes a loop waiting for its keys' slots (see keyedClaims).
		r.start(deliverCtx, row, permitAfter(d.wait[i]), spread.tenants.timed(room, key, func() { room.give(key); free.Give() }))
		d.started++
	}
	return d
}

// keySpread spreads the rows a loop hands back for want of their key's
// permits over the key's coming permits, one per interval, across its
// claims: a row handed back due at the key's next permit, like the one
// handed back a claim before, would come due with it and be handed back
// again; spread, each is claimed again once, when its permit may be
// there. It remembers, per key, the latest due it gave, and forgets it
// once that has passed.
type keySpread struct {
	last    map[string]time.Time
	tenants tenantPace
}

// after is when to hand back a row of key due from now at the earliest,
// its limit's interval every: no sooner than an interval after the last
// row handed back of the key.
func (k *keySpread) after(key string, due, every time.Duration) time.Duration {
	now := time.Now()
	if k.last == nil {
		k.last = map[string]time.Time{}
	}
	for key, at := range k.last {
		if at.Before(now) {
			delete(k.last, key)
		}
	}
	if last, ok := k.last[key]; ok {
		due = max(due, last.Add(every).Sub(now))
	}
	k.last[key] = now.Add(due)
	return due
}

// keyedClaims sizes and paces the claims of a per-key sink's loop. The
// claim takes rows in the order they became ready, whatever their key;
// the relay learns a row's key only once it holds it. So the loop claims
// one row at first, and more while every claimed row starts and some key
// could have taken more: twice as many after rows of several keys (a
// sink with many keys is at full claims after ten), one more after rows
// of one key, no more than the key may still start (a single busy key
// then claims no rows it hands back), and
// falls back to what started when rows went back. When every key it
// claimed has no permit within the horizon or no slot left, it claims
// again only when one of them may take a row: at its next permit, when a
// delivery ends, or after keyBlockedRecheck at the latest (sooner when a
// producer wakes it after a claim that started rows, see waitForWakeups:
// one that started none found the blocked keys' rows first, as the next
// would), and then, if nothing started meanwhile (a receiver that hangs
// holds its share of the slots), it claims twice as many rows, to reach the rows of other keys
// behind the blocked keys' rows. A single busy key then costs a claim per
// delivery and no row handed back. A single key slower than that second
// (its next permit further away, not paused) is waited for until its
// permit, and looked past only once per keyOthersRecheck: rechecking every second, the
// loop claimed one of its rows each second only to hand it back (three
// row updates per delivery at one per 2 s).
type keyedClaims struct {
	limit, most int
	spread      keySpread
	// looked is when the loop last claimed before its one blocked key's
	// next permit, to look for other keys' rows.
	looked time.Time
}

// keyBlockedRecheck is the longest a per-key sink's loop waits for one of
// its blocked keys to take a row, when the poll interval is shorter: a
// claim at every poll would hand a busy key's rows back each time.
const keyBlockedRecheck = time.Second

// keyOthersRecheck is how often a per-key sink's loop that has claimed the
// rows of one key only, blocked by its permit, claims before that permit
// to look for other keys' rows behind them: a key's rows ahead of other
// keys' rows hold those back this long at most before the loop starts
// stepping past them (twice as many rows at each look, see observe).
const keyOthersRecheck = 10 * time.Second

// newKeyedClaims starts the claims of a loop at one row, and bounds them
// by most.
func newKeyedClaims(most int) *keyedClaims {
	return &keyedClaims{limit: 1, most: most}
}

// observe learns from a claim of n rows, of which it asked for limit,
// made after a wait for blocked keys that ended by the clock (stale), and
// from what was done with them; when every key it claimed is blocked it
// says how long to wait before the next claim, a wait a delivery's end
// cuts short (0: no such wait), and whether that wait is the longest.
func (k *keyedClaims) observe(n, limit int, d keyedDispatch, stale bool, poll time.Duration) (wait time.Duration, longest bool) {
	switch {
	case d.handedBack > 0 && d.handedBack == d.spreadTenants:
		// Those rows are out of the way for a while: claim on, at once,
		// to reach the rows behind them.
		k.limit = min(2*limit, k.most)
		return 0, false
	case d.handedBack > 0 && d.started == 0 && stale:
		k.limit = min(2*limit, k.most)
	case d.handedBack > 0:
		k.limit = max(1, d.started)
	case n == limit && !d.blocked && d.keys == 1:
		k.limit = min(k.limit+1, k.most, d.left)
	case n == limit && !d.blocked:
		k.limit = min(2*k.limit, k.most)
	}
	if !d.blocked {
		return 0, false
	}
	most := max(poll, keyBlockedRecheck)
	if d.unblocked > 0 && d.unblocked < most {
		return d.unblocked, false
	}
	if d.keys == 1 && !d.full && d.paced && time.Since(k.looked) < keyOthersRecheck {
		return d.unblocked, false
	}
	k.looked = time.Now()
	return most, true
}

// keyLimits are the limits of keys of s, in order: each key's own when
// s gives it one (SinkConfig.KeyRateLimit), else the sink's.
func keyLimits(ctx context.Context, s SinkConfig, keys []string) []ratelimit.KeyLimit {
	rl := *s.RateLimit
	limits := make([]ratelimit.KeyLimit, len(keys))
	for i, key := range keys {
		limits[i] = ratelimit.KeyLimit{Interval: rl.Interval(), Burst: rl.Burst}
		if s.KeyRateLimit == nil {
			continue
		}
		if l, ok := keyRateLimit(ctx, s.KeyRateLimit, key); ok {
			limits[i] = l
		}
	}
	return limits
}

// minKeyInterval is the finest spacing of a key's own limit that the
// database's intervals (microseconds) can hold.
const minKeyInterval = time.Microsecond

// keyRateLimit asks own for key's own limit, as a KeyLimit; a limit
// out of range, or a panic (turned into no answer, as rateKeyOf
// does), leaves the key to the sink's limit.
func keyRateLimit(ctx context.Context, own func(context.Context, string) (sink.RateLimit, bool), key string) (l ratelimit.KeyLimit, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	rl, ok := own(ctx, key)
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

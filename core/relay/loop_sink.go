package relay

import (
	"context"
	"sync"
	"time"

	"github.com/outboxd/outboxd/core/internal/slots"
	"github.com/outboxd/outboxd/core/sink"
)

// rateReserveHorizon is how far ahead one relay reserves delivery permits of
// a rate-limited sink. Reserving a small batch at a time keeps the database
// out of the per-message path, while short horizons keep one relay from
// hoarding permits the others could use.
const rateReserveHorizon = time.Second

// sinkLoop claims for one throttled sink: only as many rows as it has free
// in-flight slots and, with a rate limit, as many as it can start within
// rateReserveHorizon; it reserves cluster-wide permits for them, only
// those that start within the hold window (see holdWindow). A row without
// one goes back pending at once, its attempt refunded, due when the next
// permit comes within reach; and the loop claims again only then. So a
// claimed row never waits for its permit past its lease, whatever the
// rate and however many relays share it. A limit per rate key is
// reserved once the rows are claimed (see dispatchByKey).
func (r *Relay) sinkLoop(ctx, deliverCtx context.Context, s SinkConfig, w *waiter) {
	free := slots.New(s.MaxInFlight, int(float64(s.MaxInFlight)*claimWhenFree))
	if !r.register(ctx, w) {
		return
	}
	rl := s.RateLimit
	perKey := rl != nil && rl.PerKey
	horizon := r.permitHorizon()
	size := newClaimSize(r.cfg.MaxClaimBytes)
	var keyed *keyedClaims
	stale := false // the last wait for blocked keys ended by the clock
	if perKey {
		keyed = newKeyedClaims(r.cfg.BatchSize)
	}
	for ctx.Err() == nil {
		if d := r.limiter.PausedFor(s.Name); d > 0 {
			// A resume by hand wakes the loop before the pause ends.
			r.idle(ctx, w, d, nil)
			continue
		}
		if d := r.untilPermitInReach(s); d > 0 {
			r.idle(ctx, w, min(d, r.cfg.PollInterval), nil)
			continue
		}
		available := free.WaitFree(ctx)
		if available == 0 {
			return
		}
		limit := min(available, size.rows(r.cfg.BatchSize))
		switch {
		case perKey:
			limit = min(limit, keyed.limit)
		case rl != nil:
			// No more rows than the permits a reservation now grants:
			// those within the horizon of the next one.
			inReach := rateReserveHorizon
			if next := r.limiter.NextPermitIn(s.Name); next > 0 {
				inReach = horizon - next
			}
			limit = min(limit, max(1, int(inReach/rl.Interval())+1))
		}
		rows, ok := r.claimOwn(ctx, w, limit, size)
		if !ok {
			continue
		}
		if perKey {
			d := r.dispatchByKey(ctx, deliverCtx, s, rows, free, &keyed.spread)
			wait, longest := keyed.observe(len(rows), limit, d, stale, r.cfg.PollInterval)
			stale = false
			if wait > 0 {
				// Every key claimed is at its limit or its share of the
				// slots: claim when one may take a row, or a delivery ends.
				if d.started > 0 {
					// A claim that started nothing found the blocked keys'
					// rows ahead of any other: after a producer's wake-up,
					// the next would find them again and hand them back.
					r.waitForWakeups(ctx, w)
				}
				began := time.Now()
				var freed <-chan struct{}
				if d.full {
					freed = free.Freed()
				}
				r.idle(ctx, w, wait, freed)
				stale = longest && time.Since(began) >= wait
			} else if len(rows) < limit {
				r.idle(ctx, w, untilDue(w.idleFor(r.cfg.PollInterval), d.firstDue()), nil)
			}
			continue
		}
		waits := make([]time.Duration, len(rows))
		if rl != nil {
			if rows, waits = r.reserve(ctx, s, rows); len(rows) == 0 {
				continue
			}
		}
		if _, batches := s.Sink.(sink.BatchSink); batches && rl == nil {
			r.startBatch(deliverCtx, rows, free)
			continue
		}
		for i, row := range rows {
			free.Take()
			r.start(deliverCtx, row, permitAfter(waits[i]), free.Give)
		}
	}
}

// untilPermitInReach is how long a loop of s waits before it claims: until
// the next permit of s's limit (a whole sink's, not per key) is within the
// reservation horizon. Rows claimed sooner would wait past the hold
// window, or hoard permits beyond the horizon, and be handed back.
func (r *Relay) untilPermitInReach(s SinkConfig) time.Duration {
	if s.RateLimit == nil || s.RateLimit.PerKey {
		return 0
	}
	return r.limiter.NextPermitIn(s.Name) - r.permitHorizon()
}

// claimOwn claims up to limit rows for the loop of one sink, w. It
// reports false when the loop goes round again instead: the claim failed
// (and claimFailed waited), or found nothing and the loop idled.
func (r *Relay) claimOwn(ctx context.Context, w *waiter, limit int, size *claimSize) ([]*claimedRow, bool) {
	rows, err := r.claim(ctx, w, limit, w.sinks)
	if err != nil {
		r.claimFailed(ctx, w, err)
		return nil, false
	}
	size.observe(rows)
	w.claimed(len(rows) == limit)
	if len(rows) == 0 {
		r.idle(ctx, w, w.idleFor(r.cfg.PollInterval), nil)
		return nil, false
	}
	return rows, true
}

// holdWindow is the longest a claimed row may wait in the relay for its
// permit: as long as the shared loop lets claimed rows wait for a slot,
// which leaves the delivery the rest of its share of the lease.
func (r *Relay) holdWindow() time.Duration {
	return time.Duration(float64(r.cfg.Lease) * claimAheadShareOfLease)
}

// reserve takes the permits of s for rows that start within the
// horizon (admitSink) and returns those rows with their waits; it hands
// the others back at once, their attempts refunded, due when their
// permits come within reach: all of them when the reservation failed
// (after claimRetryDelay) or found the sink paused (the loop then idles
// until a resume or the pause's end).
func (r *Relay) reserve(ctx context.Context, s SinkConfig, rows []*claimedRow) ([]*claimedRow, []time.Duration) {
	r.signals.EmitBeforeReserve(s.Name)
	a := r.admitSink(ctx, s, len(rows))
	started := 0
	for i, row := range rows {
		if a.wait[i] < 0 {
			r.release(row, a.due[i], a.cause[i])
			continue
		}
		rows[started], a.wait[started] = row, a.wait[i]
		started++
	}
	return rows[:started], a.wait[:started]
}

// startBatch delivers rows to their BatchSink in one call, in a goroutine
// of its own, holding a slot per row until the batch is done (or overruns
// its deadline).
func (r *Relay) startBatch(ctx context.Context, rows []*claimedRow, free *slots.Slots) {
	for range rows {
		free.Take()
	}
	r.deliveries.Add(1)
	giveAll := sync.OnceFunc(func() {
		for range rows {
			free.Give()
		}
	})
	go func() {
		defer r.deliveries.Done()
		defer giveAll()
		r.deliverBatch(ctx, rows, giveAll)
	}()
}

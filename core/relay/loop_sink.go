package relay

import (
	"context"
	"fmt"
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
	hold := r.holdWindow()
	size := newClaimSize(r.cfg.MaxClaimBytes)
	for ctx.Err() == nil {
		if d := r.limiter.PausedFor(s.Name); d > 0 {
			// A resume by hand wakes the loop before the pause ends.
			r.idle(ctx, w, d, nil)
			continue
		}
		if rl != nil && !perKey {
			// Rows claimed now would wait past the hold window, or hoard
			// permits beyond the reservation horizon.
			if d := r.limiter.NextPermitIn(s.Name) - min(hold, rateReserveHorizon); d > 0 {
				r.idle(ctx, w, min(d, r.cfg.PollInterval), nil)
				continue
			}
		}
		available := free.WaitFree(ctx)
		if available == 0 {
			return
		}
		limit := min(available, size.rows(r.cfg.BatchSize))
		if rl != nil && !perKey {
			limit = min(limit, max(1, int(rateReserveHorizon/rl.Interval())))
		}
		rows, ok := r.claimOwn(ctx, w, limit, size)
		if !ok {
			continue
		}
		if perKey {
			nextDue := r.dispatchByKey(ctx, deliverCtx, s, rows, free)
			if len(rows) < limit {
				r.idle(ctx, w, untilDue(w.idleFor(r.cfg.PollInterval), nextDue), nil)
			}
			continue
		}
		waits := make([]time.Duration, len(rows))
		if rl != nil {
			if rows, waits = r.reserve(ctx, s, rows, hold); len(rows) == 0 {
				continue
			}
		}
		if _, batches := s.Sink.(sink.BatchSink); batches && rl == nil {
			r.startBatch(deliverCtx, rows, free)
			continue
		}
		for i, row := range rows {
			free.Take()
			r.start(deliverCtx, row, waits[i], free.Give)
		}
	}
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

// reserve takes the permits of s for rows that start within hold and
// returns those rows with their waits; it hands the others back at once,
// their attempts refunded: all of them when the reservation failed or
// found the sink paused (the loop then idles until a resume or the pause's
// end), the rows beyond the granted permits due when the next permit comes
// within hold.
func (r *Relay) reserve(ctx context.Context, s SinkConfig, rows []*claimedRow, hold time.Duration) ([]*claimedRow, []time.Duration) {
	rl := s.RateLimit
	r.signals.EmitBeforeReserve(s.Name)
	g, err := r.limiter.Reserve(ctx, s.Name, rl.Interval(), rl.Burst, len(rows), hold)
	if err != nil {
		// Without permits we must not deliver: hand the rows back.
		r.logger.Warn("outbox: rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
		for _, row := range rows {
			r.release(row, 0, err)
		}
		sleep(ctx, claimRetryDelay)
		return nil, nil
	}
	if g.Paused > 0 {
		// Paused between the claim and the reservation: no relay claims
		// the rows while the database says so, and a resume makes them
		// claimable at once.
		cause := fmt.Errorf("sink %q is paused (by a Retry-After or by hand)", s.Name)
		for _, row := range rows {
			r.release(row, 0, cause)
		}
		return nil, nil
	}
	later := rows[len(g.Waits):]
	if len(later) > 0 {
		cause := fmt.Errorf("waiting for a permit of sink %q (rate_limit)", s.Name)
		for _, row := range later {
			r.release(row, max(0, g.Next-hold), cause)
		}
	}
	return rows[:len(g.Waits)], g.Waits
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

// start delivers row in its own goroutine after wait (a rate-limit permit);
// done frees the row's slot (once, possibly early: see deliver).
func (r *Relay) start(ctx context.Context, row *claimedRow, wait time.Duration, done func()) {
	r.deliveries.Add(1)
	free := sync.OnceFunc(done)
	go func() {
		defer r.deliveries.Done()
		defer free()
		r.deliver(ctx, row, wait, free)
	}()
}

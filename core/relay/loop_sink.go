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
// rateReserveHorizon; it reserves exactly that many cluster-wide permits.
// A limit per destination key is reserved once the rows are claimed (see
// dispatchByKey).
func (r *Relay) sinkLoop(ctx, deliverCtx context.Context, s SinkConfig, w *waiter) {
	free := slots.New(s.MaxInFlight, int(float64(s.MaxInFlight)*claimWhenFree))
	if !r.register(ctx, w) {
		return
	}
	for ctx.Err() == nil {
		if d := r.limiter.PausedFor(s.Name); d > 0 {
			// A resume by hand wakes the loop before the pause ends.
			r.idle(ctx, w, d, nil)
			continue
		}
		available := free.WaitFree(ctx)
		if available == 0 {
			return
		}
		limit := min(available, r.cfg.BatchSize)
		perKey := s.RateLimit != nil && s.RateLimit.PerKey
		if s.RateLimit != nil && !perKey {
			limit = min(limit, max(1, int(rateReserveHorizon/s.RateLimit.Interval())))
		}
		rows, err := r.claim(ctx, w, limit, w.sinks)
		if err != nil {
			r.claimFailed(ctx, err)
			continue
		}
		w.claimed(len(rows) == limit)
		if len(rows) == 0 {
			r.idle(ctx, w, w.idleFor(r.cfg.PollInterval), nil)
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
		if rl := s.RateLimit; rl != nil {
			if waits, err = r.limiter.Reserve(ctx, s.Name, rl.Interval(), rl.Burst, len(rows)); err != nil {
				// Without permits we must not deliver: hand the rows back.
				r.logger.Warn("outbox: rate limit reservation failed; releasing claimed rows", "sink", s.Name, "error", err)
				for _, row := range rows {
					r.release(row, 0, err)
				}
				sleep(ctx, claimRetryDelay)
				continue
			}
		}
		if _, batches := s.Sink.(sink.BatchSink); batches && s.RateLimit == nil {
			r.startBatch(deliverCtx, rows, free)
			continue
		}
		for i, row := range rows {
			free.Take()
			r.start(deliverCtx, row, waits[i], free.Give)
		}
		if s.RateLimit != nil {
			// Claim again only when this batch's permits have come due.
			sleep(ctx, waits[len(waits)-1])
		}
	}
}

// startBatch delivers rows to their BatchSink in one call, in a goroutine
// of its own, holding a slot per row until the batch is done (or overruns
// its deadline).
func (r *Relay) startBatch(ctx context.Context, rows []claimedRow, free *slots.Slots) {
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
func (r *Relay) start(ctx context.Context, row claimedRow, wait time.Duration, done func()) {
	r.deliveries.Add(1)
	free := sync.OnceFunc(done)
	go func() {
		defer r.deliveries.Done()
		defer free()
		r.deliver(ctx, row, wait, free)
	}()
}

package relay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// deliveryMinutesRetention is how long maintenance keeps the per-minute
// delivery counts: longer than any rate window asked for.
const deliveryMinutesRetention = time.Hour

// flushTimeout bounds one flush of the delivery counts.
const flushTimeout = 10 * time.Second

// sinkTally counts one sink's delivery outcomes since the last flush.
// Deliveries record into it without a lock; a flush swaps the counts out.
type sinkTally struct {
	sent, retried, dead atomic.Int64
	latency             []atomic.Int64 // sent deliveries by latency bucket
}

func newSinkTally() *sinkTally {
	return &sinkTally{latency: make([]atomic.Int64, store.LatencyBuckets)}
}

// record counts one written outcome (see deliveryReport); pauses and
// zombies are not deliveries of their own and are left out.
func (t *sinkTally) record(outcome string, elapsed time.Duration) {
	switch outcome {
	case outcomeSent:
		t.sent.Add(1)
		t.latency[sort.SearchFloat64s(store.LatencySecondsBuckets, elapsed.Seconds())].Add(1)
	case outcomeRetry:
		t.retried.Add(1)
	case outcomeDead:
		t.dead.Add(1)
	}
}

// flushDeliveryMinutes adds the relay's tallies to delivery_minutes every
// StatsInterval, in one statement. Run flushes once more after the drain.
func (r *Relay) flushDeliveryMinutes(ctx context.Context) {
	for sleep(ctx, r.cfg.StatsInterval) {
		if err := r.flushTallies(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox: could not record delivery counts", "error", err)
		}
	}
}

// flushLastTallies records the outcomes written since the last flush, the
// drain's included, as Run ends.
func (r *Relay) flushLastTallies(ctx context.Context) {
	if err := r.flushTallies(context.WithoutCancel(ctx)); err != nil {
		r.logger.Warn("outbox: could not record the last delivery counts", "error", err)
	}
}

func (r *Relay) flushTallies(ctx context.Context) error {
	var (
		sinks               []string
		sent, retried, dead []int64
		latency             []int64
	)
	for _, name := range slices.Sorted(maps.Keys(r.tallies)) {
		t := r.tallies[name]
		s, re, d := t.sent.Swap(0), t.retried.Swap(0), t.dead.Swap(0)
		if s == 0 && re == 0 && d == 0 {
			continue
		}
		sinks = append(sinks, name)
		sent, retried, dead = append(sent, s), append(retried, re), append(dead, d)
		for i := range t.latency {
			latency = append(latency, t.latency[i].Swap(0))
		}
	}
	if len(sinks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	err := r.q.AddDeliveryMinutes(ctx, r.db, store.AddDeliveryMinutesParams{Sinks: sinks, Sent: sent, Retried: retried,
		Dead: dead, Latency: latency, Buckets: int64(store.LatencyBuckets)})
	if err != nil {
		// The counts of this flush are lost: they only feed the console's
		// rates, and holding them back could grow without bound while the
		// database is away.
		return fmt.Errorf("add to delivery_minutes: %w", err)
	}
	return nil
}

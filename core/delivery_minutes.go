package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultRateWindow is how far back Overview looks for delivery rates and
// latencies.
const DefaultRateWindow = 5 * time.Minute

// deliveryMinutesRetention is how long maintenance keeps the per-minute
// delivery counts: longer than any rate window asked for.
const deliveryMinutesRetention = time.Hour

// flushTimeout bounds one flush of the delivery counts.
const flushTimeout = 10 * time.Second

// latencyBuckets is the number of latency buckets stored per sink and
// minute: one per bound of secondsBuckets (a delivery falls in the first
// bound it does not exceed), plus one for anything slower.
var latencyBuckets = len(secondsBuckets) + 1

// sinkTally counts one sink's delivery outcomes since the last flush.
// Deliveries record into it without a lock; a flush swaps the counts out.
type sinkTally struct {
	sent, retried, dead atomic.Int64
	latency             []atomic.Int64 // sent deliveries by latency bucket
}

func newSinkTally() *sinkTally {
	return &sinkTally{latency: make([]atomic.Int64, latencyBuckets)}
}

// record counts one written outcome (see deliveryReport); pauses and
// zombies are not deliveries of their own and are left out.
func (t *sinkTally) record(outcome string, elapsed time.Duration) {
	switch outcome {
	case outcomeSent:
		t.sent.Add(1)
		t.latency[sort.SearchFloat64s(secondsBuckets, elapsed.Seconds())].Add(1)
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
	if _, err := r.db.Exec(ctx, r.ob.sql.addDeliveryMinutes, sinks, sent, retried, dead, latency, latencyBuckets); err != nil {
		// The counts of this flush are lost: they only feed the console's
		// rates, and holding them back could grow without bound while the
		// database is away.
		return fmt.Errorf("add to delivery_minutes: %w", err)
	}
	return nil
}

// DeliveryRate is one sink's deliveries over a recent window, from the
// per-minute counts every relay records.
type DeliveryRate struct {
	// Sent, Retried and Dead count the attempts that delivered, failed
	// and will be retried, and failed for good.
	Sent, Retried, Dead int64
	// PerSecond is Sent divided by the seconds the window covers.
	PerSecond float64
	// P50 and P99 estimate the median and 99th percentile of the time a
	// successful delivery spent in the sink (from a histogram; zero when
	// nothing was sent).
	P50, P99 time.Duration
}

// DeliveryRates returns, by sink, the deliveries of the last window
// (rounded up to whole minutes; 0 means DefaultRateWindow). It reads a few
// rows per sink of the per-minute counts, never a message.
func (o *Outbox) DeliveryRates(ctx context.Context, db DBTX, window time.Duration) (map[string]DeliveryRate, error) {
	if window <= 0 {
		window = DefaultRateWindow
	}
	rows, err := db.Query(ctx, o.sql.deliveryRates, window.Truncate(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("outbox: read delivery rates: %w", err)
	}
	rates := map[string]DeliveryRate{}
	var (
		sink    string
		r       DeliveryRate
		buckets []int64
		covered float64
	)
	_, err = pgx.ForEachRow(rows, []any{&sink, &r.Sent, &r.Retried, &r.Dead, &buckets, &covered}, func() error {
		r.PerSecond = float64(r.Sent) / max(covered, 1)
		r.P50, r.P99 = latencyQuantile(buckets, 0.5), latencyQuantile(buckets, 0.99)
		rates[sink] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: read delivery rates: %w", err)
	}
	return rates, nil
}

// latencyQuantile estimates quantile q of the deliveries counted in
// buckets, interpolating linearly inside the bucket it falls in (as
// Prometheus' histogram_quantile does). A quantile in the last, unbounded
// bucket is reported as its lower bound.
func latencyQuantile(buckets []int64, q float64) time.Duration {
	var total int64
	for _, n := range buckets {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	var below int64
	for i, n := range buckets {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		lower := 0.0
		if i > 0 {
			lower = secondsBuckets[min(i, len(secondsBuckets))-1]
		}
		if i >= len(secondsBuckets) {
			return seconds(lower)
		}
		return seconds(lower + (secondsBuckets[i]-lower)*(rank-float64(below))/float64(n))
	}
	return seconds(secondsBuckets[len(secondsBuckets)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// DefaultRateWindow is how far back Overview looks for delivery rates and
// latencies.
const DefaultRateWindow = 5 * time.Minute

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
func (o *Operator) DeliveryRates(ctx context.Context, db store.DBTX, window time.Duration) (map[string]DeliveryRate, error) {
	if window <= 0 {
		window = DefaultRateWindow
	}
	rows, err := o.q.DeliveryRates(ctx, db, window.Truncate(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("outbox: read delivery rates: %w", err)
	}
	rates := make(map[string]DeliveryRate, len(rows))
	for _, row := range rows {
		rates[row.Sink] = DeliveryRate{Sent: row.Sent, Retried: row.Retried, Dead: row.Dead,
			PerSecond: float64(row.Sent) / max(row.CoveredSeconds, 1),
			P50:       latencyQuantile(row.Buckets, 0.5), P99: latencyQuantile(row.Buckets, 0.99)}
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
			lower = store.LatencySecondsBuckets[min(i, len(store.LatencySecondsBuckets))-1]
		}
		if i >= len(store.LatencySecondsBuckets) {
			return seconds(lower)
		}
		return seconds(lower + (store.LatencySecondsBuckets[i]-lower)*(rank-float64(below))/float64(n))
	}
	return seconds(store.LatencySecondsBuckets[len(store.LatencySecondsBuckets)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

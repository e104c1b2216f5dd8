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
			P50:       store.LatencyQuantile(row.Buckets, 0.5), P99: store.LatencyQuantile(row.Buckets, 0.99)}
	}
	return rates, nil
}

package store

import "time"

// LatencySecondsBuckets are the histogram boundaries, in seconds, of delivery
// durations and lags: from a fast webhook (5 ms) to a backlog or a long
// backoff (an hour). The SDK's defaults (0, 5, 10, ... 10000) suit
// milliseconds and would put every delivery in the first bucket.
var LatencySecondsBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// LatencyBuckets is the number of latency buckets stored per sink and minute
// in delivery_minutes: one per bound of LatencySecondsBuckets (a delivery
// falls in the first bound it does not exceed), plus one for anything
// slower.
var LatencyBuckets = len(LatencySecondsBuckets) + 1

// LatencyQuantile estimates quantile q of the deliveries counted in
// buckets (LatencyBuckets counts, bounded by LatencySecondsBuckets),
// interpolating linearly inside the bucket it falls in (as Prometheus'
// histogram_quantile does). A quantile in the last, unbounded bucket is
// reported as its lower bound; nothing counted is 0.
func LatencyQuantile(buckets []int64, q float64) time.Duration {
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
			lower = LatencySecondsBuckets[min(i, len(LatencySecondsBuckets))-1]
		}
		if i >= len(LatencySecondsBuckets) {
			return seconds(lower)
		}
		return seconds(lower + (LatencySecondsBuckets[i]-lower)*(rank-float64(below))/float64(n))
	}
	return seconds(LatencySecondsBuckets[len(LatencySecondsBuckets)-1])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

package store

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

package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// DefaultGaugeRefresh is how long one [Outbox.Stats] query serves the
// gauges registered by [Outbox.RegisterGauges]. Scrapes within that window
// (several Prometheus servers, an OTLP reader and /metrics at once) reuse
// the cached result instead of each running a GROUP BY over the table.
const DefaultGaugeRefresh = 15 * time.Second

// gaugeQueryTimeout bounds one Stats query made on behalf of a scrape, so a
// slow database cannot hang the metrics endpoint.
const gaugeQueryTimeout = 5 * time.Second

// UnknownSink is the sink label under which the gauges report rows whose
// sink column names none of GaugeConfig.Sinks. Producers can write any sink
// name; folding the strays into one label keeps the label set bounded.
const UnknownSink = "unknown"

// attrStatus labels row counts with a row status (a closed set).
const attrStatus = attribute.Key("status")

// GaugeConfig configures [Outbox.RegisterGauges].
type GaugeConfig struct {
	// Sinks are the configured sink names. Each is reported on every
	// collection, with zeros when it has no rows, so a drained backlog shows
	// as 0 instead of a series that vanishes. Rows of other sinks are
	// reported under UnknownSink.
	Sinks []string
	// Refresh is how long one Stats result is reused; zero means
	// DefaultGaugeRefresh.
	Refresh time.Duration
}

// RegisterGauges registers the outbox's table gauges with mp:
//
//   - outbox.rows{sink, status}: rows per sink and status;
//   - outbox.oldest_pending.age{sink}: seconds the oldest row waiting for
//     delivery (pending or failed) has waited; 0 when none waits;
//   - outbox.sink.pause.remaining{sink}: seconds a configured sink stays
//     paused cluster-wide by a receiver's Retry-After; 0 when it is not;
//   - outbox.events.dropped: events published that no route matched and
//     that the routes dropped (routes_unmatched: drop), counted by the
//     database for every producer, so every process reports the same
//     cluster-wide total.
//
// The values come from [Outbox.Stats], the sink_limits table and the
// dropped events, read
// through db at most once per cfg.Refresh whatever the scrape rate. Labels
// are sink names and statuses only. Call Unregister on the result to stop
// (before closing db).
func (o *Outbox) RegisterGauges(mp metric.MeterProvider, db DBTX, cfg GaugeConfig) (metric.Registration, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultGaugeRefresh
	}
	meter := mp.Meter(instrumentationName)
	rows, err := meter.Int64ObservableGauge("outbox.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows in the outbox by sink and status."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.rows: %w", err)
	}
	age, err := meter.Float64ObservableGauge("outbox.oldest_pending.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest row waiting for delivery (pending or failed), by sink."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.oldest_pending.age: %w", err)
	}
	paused, err := meter.Float64ObservableGauge("outbox.sink.pause.remaining", metric.WithUnit("s"),
		metric.WithDescription("Seconds a sink stays paused cluster-wide by a Retry-After (0 when it is not), by sink."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.sink.pause.remaining: %w", err)
	}
	dropped, err := meter.Int64ObservableCounter("outbox.events.dropped", metric.WithUnit("{event}"),
		metric.WithDescription("Events published that matched no route and were dropped (routes_unmatched: drop), cluster-wide."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create counter outbox.events.dropped: %w", err)
	}
	cache := &statsCache{ob: o, db: db, refresh: cfg.Refresh}
	known := make(map[string]bool, len(cfg.Sinks))
	for _, s := range cfg.Sinks {
		known[s] = true
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		snap, err := cache.get(ctx)
		if err != nil {
			return err
		}
		stats, pauses := snap.stats, snap.pauses
		obs.ObserveInt64(dropped, snap.dropped)
		for sink := range known {
			obs.ObserveFloat64(paused, pauses[sink].Seconds(), metric.WithAttributes(attrSinkName.String(sink)))
		}
		for sink, s := range foldUnknownSinks(stats, known) {
			sinkAttr := attrSinkName.String(sink)
			for status, n := range s.byStatus() {
				obs.ObserveInt64(rows, n, metric.WithAttributes(sinkAttr, attrStatus.String(string(status))))
			}
			obs.ObserveFloat64(age, s.OldestPendingAge.Seconds(), metric.WithAttributes(sinkAttr))
		}
		return nil
	}, rows, age, paused, dropped)
	if err != nil {
		return nil, fmt.Errorf("outbox: register gauge callback: %w", err)
	}
	return reg, nil
}

// byStatus lists the counts of s by status.
func (s SinkStats) byStatus() map[Status]int64 {
	return map[Status]int64{
		StatusPending:    s.Pending,
		StatusInProgress: s.InProgress,
		StatusFailed:     s.Failed,
		StatusSent:       s.Sent,
		StatusDead:       s.Dead,
	}
}

// foldUnknownSinks returns stats with an entry (maybe all zeros) for every
// known sink and every other sink summed into UnknownSink.
func foldUnknownSinks(stats map[string]SinkStats, known map[string]bool) map[string]SinkStats {
	out := make(map[string]SinkStats, len(known)+1)
	for sink := range known {
		out[sink] = stats[sink]
	}
	for sink, s := range stats {
		if known[sink] {
			continue
		}
		u := out[UnknownSink]
		u.Pending += s.Pending
		u.InProgress += s.InProgress
		u.Failed += s.Failed
		u.Sent += s.Sent
		u.Dead += s.Dead
		u.OldestPendingAge = max(u.OldestPendingAge, s.OldestPendingAge)
		out[UnknownSink] = u
	}
	return out
}

// statsCache runs Stats and reads the pauses at most once per refresh;
// concurrent collections wait for the one read in progress rather than
// starting their own.
type statsCache struct {
	ob      *Outbox
	db      DBTX
	refresh time.Duration

	mu      sync.Mutex
	last    *gaugeSnapshot
	fetched time.Time
}

// gaugeSnapshot is what one collection reports.
type gaugeSnapshot struct {
	stats   map[string]SinkStats
	pauses  map[string]time.Duration // remaining, of the sinks paused when fetched
	dropped int64                    // events dropped for want of a route, ever
}

func (c *statsCache) get(ctx context.Context) (*gaugeSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.fetched) < c.refresh {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, gaugeQueryTimeout)
	defer cancel()
	snap := &gaugeSnapshot{}
	var err error
	if snap.stats, err = c.ob.Stats(ctx, c.db); err == nil {
		if snap.pauses, err = c.ob.sinkPauses(ctx, c.db); err == nil {
			err = c.db.QueryRow(ctx, c.ob.sql.droppedEvents).Scan(&snap.dropped)
		}
	}
	if err != nil {
		// Serving the stale result as if it were current would hide an
		// outage of the database behind flat lines; report nothing instead.
		return nil, fmt.Errorf("outbox: gauges: %w", err)
	}
	c.last, c.fetched = snap, time.Now()
	return snap, nil
}

// sinkPauses returns how much longer each paused sink stays paused.
func (o *Outbox) sinkPauses(ctx context.Context, db DBTX) (map[string]time.Duration, error) {
	rows, err := db.Query(ctx, o.sql.activePauses)
	if err != nil {
		return nil, fmt.Errorf("sink pauses: %w", err)
	}
	pauses := map[string]time.Duration{}
	var (
		sink      string
		remaining time.Duration
	)
	_, err = pgx.ForEachRow(rows, []any{&sink, &remaining}, func() error {
		pauses[sink] = remaining
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sink pauses: %w", err)
	}
	return pauses, nil
}

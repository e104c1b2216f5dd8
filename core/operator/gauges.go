package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/otelscope"
	"github.com/outboxd/outboxd/internal/store"
)

// DefaultGaugeRefresh is how long one read of the stats snapshot serves
// the gauges registered by [Operator.RegisterGauges]; scrapes within that
// window (several Prometheus servers, an OTLP reader and /metrics at once)
// share it.
const DefaultGaugeRefresh = DefaultStatsInterval

// gaugeQueryTimeout bounds one read made on behalf of a scrape, so a slow
// database cannot hang the metrics endpoint.
const gaugeQueryTimeout = 5 * time.Second

// gaugeStaleAfter is the age past which a snapshot is not reported: no
// relay has recomputed it for that long, so flat lines would lie.
const gaugeStaleAfter = time.Minute

// UnknownSink is the sink label under which the gauges report rows whose
// sink column names none of GaugeConfig.Sinks. Producers can write any sink
// name; folding the strays into one label keeps the label set bounded.
const UnknownSink = "unknown"

// attrStatus labels row counts with a row status (a closed set).
const attrStatus = attribute.Key("status")

// attrPauseReason labels outbox.sink.pause.remaining with who paused the
// sink, so an alert can tell a planned pause by hand from a receiver's
// Retry-After: pauseReasonHand or pauseReasonRetryAfter.
const attrPauseReason = attribute.Key("reason")

// The values of the pause gauge's reason label.
const (
	pauseReasonHand       = "hand"
	pauseReasonRetryAfter = "retry_after"
)

// GaugeConfig configures [Operator.RegisterGauges].
type GaugeConfig struct {
	// Sinks are the configured sink names. Each is reported on every
	// collection, with zeros when it has no rows, so a drained backlog shows
	// as 0 instead of a series that vanishes. Rows of other sinks are
	// reported under UnknownSink.
	Sinks []string
	// Refresh is how long one read of the snapshot is reused; zero means
	// DefaultGaugeRefresh.
	Refresh time.Duration
	// Relay, when set, is the process's relay (a *relay.Relay): the gauges are reported
	// only while it is the relay that computes the cluster's counts, so
	// that exactly one process of the cluster reports them and sum() over
	// all pods is right. Without it every process reports the cluster's
	// counts (use max(), not sum(), across processes).
	Relay interface{ ID() string }
}

// RegisterGauges registers the outbox's table gauges with mp:
//
//   - outbox.rows{sink, status}: rows per sink and status (pending,
//     in_progress, failed, dead);
//   - outbox.rows.sent_last_hour{sink}: rows sent in the last hour;
//   - outbox.oldest_pending.age{sink}: seconds the oldest row waiting for
//     delivery (pending or failed) has waited; 0 when none waits;
//   - outbox.sink.pause.remaining{sink, reason}: seconds a configured sink
//     stays paused cluster-wide, under reason "hand" for an operator's pause
//     and "retry_after" for a receiver's; both series are reported for
//     every configured sink, 0 for the reason not in force;
//   - outbox.events.dropped: events published that no route matched and
//     that the routes dropped (routes_unmatched: drop), counted by the
//     database for every producer: a cluster-wide total.
//
// The values come from the cluster's stats snapshot (see
// [Operator.StatsSnapshot]), which one relay recomputes from the partial
// indexes every few seconds, the sink_limits table and the dropped events'
// tally: a scrape never counts the messages table.
// Nothing is reported while the snapshot is missing or stale, or, with
// cfg.Relay, while another relay computes it. Labels are sink names and
// statuses only. Call Unregister on the result to stop (before closing db).
func (o *Operator) RegisterGauges(mp metric.MeterProvider, db store.DBTX, cfg GaugeConfig) (metric.Registration, error) {
	if cfg.Refresh <= 0 {
		cfg.Refresh = DefaultGaugeRefresh
	}
	meter := mp.Meter(otelscope.Name)
	rows, err := meter.Int64ObservableGauge("outbox.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows in the outbox waiting, in progress or dead, by sink and status."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.rows: %w", err)
	}
	sent, err := meter.Int64ObservableGauge("outbox.rows.sent_last_hour", metric.WithUnit("{row}"),
		metric.WithDescription("Rows sent in the last hour, by sink."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.rows.sent_last_hour: %w", err)
	}
	age, err := meter.Float64ObservableGauge("outbox.oldest_pending.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest row waiting for delivery (pending or failed), by sink."))
	if err != nil {
		return nil, fmt.Errorf("outbox: create gauge outbox.oldest_pending.age: %w", err)
	}
	paused, err := meter.Float64ObservableGauge("outbox.sink.pause.remaining", metric.WithUnit("s"),
		metric.WithDescription("Seconds a sink stays paused cluster-wide (0 when it is not), by sink and reason: hand or retry_after."))
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
		if time.Since(snap.TakenAt) > gaugeStaleAfter || (cfg.Relay != nil && snap.TakenBy != cfg.Relay.ID()) {
			return nil
		}
		obs.ObserveInt64(dropped, snap.dropped)
		for sink := range known {
			p := snap.pauses[sink]
			hand, retryAfter := 0.0, p.remaining.Seconds()
			if p.byHand {
				hand, retryAfter = retryAfter, hand
			}
			sinkAttr := otelscope.AttrSink.String(sink)
			obs.ObserveFloat64(paused, hand, metric.WithAttributes(sinkAttr, attrPauseReason.String(pauseReasonHand)))
			obs.ObserveFloat64(paused, retryAfter, metric.WithAttributes(sinkAttr, attrPauseReason.String(pauseReasonRetryAfter)))
		}
		for sink, s := range foldUnknownSinks(snap.Sinks, known) {
			sinkAttr := otelscope.AttrSink.String(sink)
			for st, n := range s.byStatus() {
				obs.ObserveInt64(rows, n, metric.WithAttributes(sinkAttr, attrStatus.String(string(st))))
			}
			obs.ObserveInt64(sent, s.SentLastHour, metric.WithAttributes(sinkAttr))
			obs.ObserveFloat64(age, s.OldestPendingAge.Seconds(), metric.WithAttributes(sinkAttr))
		}
		return nil
	}, rows, sent, age, paused, dropped)
	if err != nil {
		return nil, fmt.Errorf("outbox: register gauge callback: %w", err)
	}
	return reg, nil
}

// byStatus lists the counts of s by status.
func (s SinkCounts) byStatus() map[status.Row]int64 {
	return map[status.Row]int64{
		status.Pending:    s.Pending,
		status.InProgress: s.InProgress,
		status.Failed:     s.Failed,
		status.Dead:       s.Dead,
	}
}

// foldUnknownSinks returns stats with an entry (maybe all zeros) for every
// known sink and every other sink summed into UnknownSink.
func foldUnknownSinks(stats map[string]SinkCounts, known map[string]bool) map[string]SinkCounts {
	out := make(map[string]SinkCounts, len(known)+1)
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
		u.SentLastHour += s.SentLastHour
		u.Dead += s.Dead
		u.OldestPendingAge = max(u.OldestPendingAge, s.OldestPendingAge)
		out[UnknownSink] = u
	}
	return out
}

// statsCache reads the snapshot and the pauses at most once per refresh;
// concurrent collections wait for the one read in progress rather than
// starting their own.
type statsCache struct {
	ob      *Operator
	db      store.DBTX
	refresh time.Duration

	mu      sync.Mutex
	last    *gaugeReading
	fetched time.Time
}

// gaugeReading is what one collection reports.
type gaugeReading struct {
	StatsSnapshot
	pauses  map[string]activePause // of the sinks paused when read
	dropped int64                  // events dropped for want of a route, ever
}

func (c *statsCache) get(ctx context.Context) (*gaugeReading, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && time.Since(c.fetched) < c.refresh {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(ctx, gaugeQueryTimeout)
	defer cancel()
	snap, err := c.ob.StatsSnapshot(ctx, c.db)
	if err != nil {
		// Serving the stale result as if it were current would hide an
		// outage of the database behind flat lines; report nothing instead.
		return nil, fmt.Errorf("outbox: gauges: %w", err)
	}
	reading := &gaugeReading{StatsSnapshot: snap}
	if reading.pauses, err = c.ob.sinkPauses(ctx, c.db); err != nil {
		return nil, fmt.Errorf("outbox: gauges: %w", err)
	}
	if reading.dropped, err = c.ob.q.DroppedEvents(ctx, c.db); err != nil {
		return nil, fmt.Errorf("outbox: gauges: dropped events: %w", err)
	}
	c.last, c.fetched = reading, time.Now()
	return c.last, nil
}

// activePause is a pause in force: how much longer it runs and whether it
// is an operator's.
type activePause struct {
	remaining time.Duration
	byHand    bool
}

// sinkPauses returns the pause of each paused sink.
func (o *Operator) sinkPauses(ctx context.Context, db store.DBTX) (map[string]activePause, error) {
	rows, err := o.q.ActivePauses(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("sink pauses: %w", err)
	}
	pauses := make(map[string]activePause, len(rows))
	for _, r := range rows {
		pauses[r.Sink] = activePause{remaining: r.Remaining, byHand: r.ByHand}
	}
	return pauses, nil
}

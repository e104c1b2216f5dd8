package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/internal/otelscope"
)

// unconfiguredCheckInterval is how often a relay looks for rows waiting for
// sinks it does not have, and so how often it warns about each such sink.
const unconfiguredCheckInterval = time.Minute

// unconfiguredCheckTimeout bounds one such look.
const unconfiguredCheckTimeout = 10 * time.Second

// unconfiguredSinks is what the last look found, for the gauges.
type unconfiguredSinks struct {
	mu      sync.Mutex
	waiting int64
	oldest  time.Duration
}

// watchUnconfiguredSinks warns, once per check, about every sink that has
// rows waiting but is not configured on this relay: in a rolling deploy
// that adds a sink, they are the new sink's rows, delivered once a relay
// that has it runs; otherwise they are a typo in a producer's sink name or
// a removed sink, and wait until someone configures or purges them. The
// gauges registered here carry the same for alerting.
func (r *Relay) watchUnconfiguredSinks(ctx context.Context) {
	state := &unconfiguredSinks{}
	if reg, err := r.registerUnconfiguredGauges(state); err != nil {
		r.logger.Warn("outbox: could not register the unconfigured-sink gauges", "error", err)
	} else {
		defer func() { _ = reg.Unregister() }()
	}
	configured := slices.Sorted(func(yield func(string) bool) {
		for name := range r.sinks {
			if !yield(name) {
				return
			}
		}
	})
	ticker := time.NewTicker(unconfiguredCheckInterval)
	defer ticker.Stop()
	for {
		r.checkUnconfiguredSinks(ctx, configured, state)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (r *Relay) checkUnconfiguredSinks(ctx context.Context, configured []string, state *unconfiguredSinks) {
	ctx, cancel := context.WithTimeout(ctx, unconfiguredCheckTimeout)
	defer cancel()
	found, err := r.ops.UnconfiguredSinks(ctx, r.db, configured)
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Warn("outbox: could not look for rows of unconfigured sinks", "error", err)
		}
		return
	}
	var waiting int64
	var oldest time.Duration
	names := make([]string, 0, len(found))
	for _, s := range found {
		var count any = s.Waiting
		if s.AtLeast {
			count = fmt.Sprintf("%d or more", s.Waiting)
		}
		r.logger.Warn("outbox: rows are waiting for a sink this relay does not have; they stay pending until a relay configured with it delivers them (configure the sink, or delete them with outboxd dlq purge --all --waiting --sink NAME)",
			"sink", s.Sink, "waiting", count, "oldest_pending_age", s.OldestPendingAge.Round(time.Second))
		waiting += s.Waiting
		oldest = max(oldest, s.OldestPendingAge)
		names = append(names, s.Sink)
	}
	state.mu.Lock()
	state.waiting, state.oldest = waiting, oldest
	state.mu.Unlock()
	r.signals.EmitUnconfiguredSinks(names)
}

// registerUnconfiguredGauges reports state as gauges. They carry no sink
// label: the names come from producers and could be anything.
func (r *Relay) registerUnconfiguredGauges(state *unconfiguredSinks) (metric.Registration, error) {
	meter := meterProvider(r.cfg.MeterProvider).Meter(otelscope.Name)
	rows, err := meter.Int64ObservableGauge("outbox.unconfigured_sinks.rows", metric.WithUnit("{row}"),
		metric.WithDescription("Rows waiting for delivery to sinks this relay is not configured with."))
	if err != nil {
		return nil, err
	}
	age, err := meter.Float64ObservableGauge("outbox.unconfigured_sinks.oldest_pending.age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest row waiting for a sink this relay is not configured with."))
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		state.mu.Lock()
		defer state.mu.Unlock()
		obs.ObserveInt64(rows, state.waiting)
		obs.ObserveFloat64(age, state.oldest.Seconds())
		return nil
	}, rows, age)
}

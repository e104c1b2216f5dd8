package maintenance

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/otelscope"
)

const (
	// unconfiguredCheckInterval is how often a relay looks for rows
	// waiting for sinks it does not have, and so how often it warns about
	// each such sink.
	unconfiguredCheckInterval = time.Minute
	// unconfiguredCheckTimeout bounds one such look.
	unconfiguredCheckTimeout = 10 * time.Second
)

// Unconfigured warns, once per check, about every sink that has rows
// waiting but is not configured on this relay: in a rolling deploy that
// adds a sink, they are the new sink's rows, delivered once a relay that
// has it runs; otherwise they are a typo in a producer's sink name or a
// removed sink, and wait until someone configures or purges them. Its
// gauges carry the same for alerting; they carry no sink label: the names
// come from producers and could be anything.
type Unconfigured struct {
	runner
	env        Env
	ops        *operator.Operator
	configured []string
	meter      metric.MeterProvider

	mu      sync.Mutex // guards what the last look found, for the gauges
	waiting int64
	oldest  time.Duration
}

// NewUnconfigured returns the watch, through ops, for the rows of sinks
// other than configured, with gauges from meter.
func NewUnconfigured(env Env, ops *operator.Operator, configured []string, meter metric.MeterProvider) *Unconfigured {
	return &Unconfigured{env: env, ops: ops, configured: slices.Sorted(slices.Values(configured)), meter: meter}
}

// Start looks at once and then every minute until ctx ends or Stop; the
// gauges are reported meanwhile.
func (u *Unconfigured) Start(ctx context.Context) {
	u.start(ctx, func(ctx context.Context) {
		if reg, err := u.registerGauges(); err != nil {
			u.env.Logger.Warn("outbox: could not register the unconfigured-sink gauges", "error", err)
		} else {
			defer func() { _ = reg.Unregister() }()
		}
		every(ctx, unconfiguredCheckInterval, u.check)
	})
}

func (u *Unconfigured) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, unconfiguredCheckTimeout)
	defer cancel()
	found, err := u.ops.UnconfiguredSinks(ctx, u.env.DB, u.configured)
	if err != nil {
		if ctx.Err() == nil {
			u.env.Logger.Warn("outbox: could not look for rows of unconfigured sinks", "error", err)
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
		u.env.Logger.Warn("outbox: rows are waiting for a sink this relay does not have; they stay pending until a relay configured with it delivers them (configure the sink, or delete them with outboxd dlq purge --all --waiting --sink NAME)",
			"sink", s.Sink, "waiting", count, "oldest_pending_age", s.OldestPendingAge.Round(time.Second))
		waiting += s.Waiting
		oldest = max(oldest, s.OldestPendingAge)
		names = append(names, s.Sink)
	}
	u.mu.Lock()
	u.waiting, u.oldest = waiting, oldest
	u.mu.Unlock()
	u.env.Signals.EmitUnconfiguredSinks(names)
}

// registerGauges reports what the last look found.
func (u *Unconfigured) registerGauges() (metric.Registration, error) {
	meter := u.meter.Meter(otelscope.Name)
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
		u.mu.Lock()
		defer u.mu.Unlock()
		obs.ObserveInt64(rows, u.waiting)
		obs.ObserveFloat64(age, u.oldest.Seconds())
		return nil
	}, rows, age)
}

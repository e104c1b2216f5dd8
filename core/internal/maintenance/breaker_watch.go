package maintenance

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Breakers are the relay's circuit breakers as the breaker watch drives
// them. The relay implements them: the probes they start are delivered by
// the relay's pipeline, which stays in package relay.
type Breakers interface {
	// LoadBreakers replaces the relay's view of the open breakers with
	// the database's.
	LoadBreakers(ctx context.Context) error
	// ActOnBreakers acts on the open breakers as last loaded (disables
	// the destinations open too long, starts the probes due) and returns
	// how soon the next probe comes due; 0 when none is open.
	ActOnBreakers(ctx context.Context) time.Duration
	// RegisterCircuitGauge registers the gauge of the breakers' states,
	// reported while the watch runs.
	RegisterCircuitGauge() (metric.Registration, error)
}

// BreakerWatch is every relay's watch over its circuit breakers: it
// re-reads the open breakers every interval, or acts at once on those the
// relay has just read itself (a kick: the relay reloads them on every
// pause notification, which a breaker's change sends), and then acts on
// them, sooner than the interval when a probe comes due before.
type BreakerWatch struct {
	runner
	env      Env
	breakers Breakers
	interval time.Duration
	kick     <-chan struct{}
}

// NewBreakerWatch returns the watch over breakers, re-reading them every
// interval; a receive from kick says the relay has just loaded them.
func NewBreakerWatch(env Env, breakers Breakers, interval time.Duration, kick <-chan struct{}) *BreakerWatch {
	return &BreakerWatch{env: env, breakers: breakers, interval: interval, kick: kick}
}

// Start loads and acts at once, and then as described on BreakerWatch,
// until ctx ends or Stop; the gauge is reported meanwhile.
func (w *BreakerWatch) Start(ctx context.Context) {
	w.start(ctx, w.run)
}

func (w *BreakerWatch) run(ctx context.Context) {
	if reg, err := w.breakers.RegisterCircuitGauge(); err != nil {
		w.env.Logger.Warn("outbox: could not register the circuit breaker gauge", "error", err)
	} else {
		defer func() { _ = reg.Unregister() }()
	}
	loaded := false // by the relay, which kicked the watch
	for ctx.Err() == nil {
		next := w.interval
		var err error
		if !loaded {
			err = w.breakers.LoadBreakers(ctx)
		}
		if err != nil {
			if ctx.Err() == nil {
				w.env.Logger.Warn("outbox: could not load circuit breakers", "error", err)
			}
		} else if due := w.breakers.ActOnBreakers(ctx); due > 0 {
			next = min(next, due)
		}
		loaded = false
		select {
		case <-ctx.Done():
		case <-w.kick:
			loaded = true
		case <-time.After(next):
		}
	}
}

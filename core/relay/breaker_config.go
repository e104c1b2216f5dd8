package relay

import (
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/internal/breaker"
)

// Defaults of a sink's circuit breaker (SinkConfig.CircuitBreaker).
const (
	// DefaultBreakerConsecutiveFailures opens a breaker after this many
	// deliveries in a row on one relay found the receiver down
	// (connection refused or reset, DNS or TLS failure, timeout, 502, 503,
	// 504) or answered with a Retry-After: a handful, so an outage costs
	// each message at most about one attempt.
	DefaultBreakerConsecutiveFailures = 5
	// DefaultBreakerFailureRatio opens a breaker when this share of the
	// deliveries within DefaultBreakerWindow failed (any 5xx counts), once
	// there were at least DefaultBreakerMinDeliveries: a receiver that
	// fails most requests is unwell even when it answers.
	DefaultBreakerFailureRatio = 0.5
	// DefaultBreakerMinDeliveries keeps a few poison messages (each fails
	// at most max_attempts times) from making a share.
	DefaultBreakerMinDeliveries = 20
	// DefaultBreakerWindow is the span over which the share is counted.
	DefaultBreakerWindow = 30 * time.Second
	// DefaultProbeInterval is the wait before an open breaker's first
	// probe; each failed probe doubles it.
	DefaultProbeInterval = 5 * time.Second
	// DefaultMaxProbeInterval caps the wait between probes: a receiver
	// that recovers after a long outage is found within minutes.
	DefaultMaxProbeInterval = 5 * time.Minute
)

// CircuitBreaker configures the circuit breakers of one sink: one for the
// sink, or, for a sink limited per key (RateLimit.PerKey), one per rate
// key. While a breaker is open no relay of the cluster claims its rows: they
// wait pending, their attempts untouched, while once per probe interval
// one relay delivers one of them as a probe, whose success closes the
// breaker. Zero fields take the defaults above.
type CircuitBreaker struct {
	// Disabled turns the breakers off: failures spend attempts until the
	// rows are dead, whatever the receiver's state.
	Disabled bool
	// ConsecutiveFailures, FailureRatio, MinDeliveries and Window say when
	// a breaker opens (see the defaults).
	ConsecutiveFailures int
	FailureRatio        float64
	MinDeliveries       int
	Window              time.Duration
	// ProbeInterval is the wait before the first probe, doubling at each
	// failed probe up to MaxProbeInterval.
	ProbeInterval    time.Duration
	MaxProbeInterval time.Duration
}

// effective completes c with the defaults and returns an error per field
// out of range.
func (c CircuitBreaker) effective(sinkName string) (CircuitBreaker, []error) {
	setDefault(&c.ConsecutiveFailures, DefaultBreakerConsecutiveFailures)
	setDefault(&c.FailureRatio, DefaultBreakerFailureRatio)
	setDefault(&c.MinDeliveries, DefaultBreakerMinDeliveries)
	setDefault(&c.Window, DefaultBreakerWindow)
	setDefault(&c.ProbeInterval, DefaultProbeInterval)
	setDefault(&c.MaxProbeInterval, DefaultMaxProbeInterval)
	var errs []error
	invalid := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Sink: sinkName, Field: "CircuitBreaker." + field, Err: fmt.Errorf(format, args...)})
	}
	if c.ConsecutiveFailures < 0 {
		invalid("ConsecutiveFailures", "must not be negative, got %d", c.ConsecutiveFailures)
	}
	if c.FailureRatio < 0 || c.FailureRatio > 1 {
		invalid("FailureRatio", "want a share between 0 and 1, got %g", c.FailureRatio)
	}
	if c.MinDeliveries < 0 {
		invalid("MinDeliveries", "must not be negative, got %d", c.MinDeliveries)
	}
	if c.Window < 0 {
		invalid("Window", "must not be negative, got %s", c.Window)
	}
	if c.ProbeInterval < 0 || c.MaxProbeInterval < c.ProbeInterval {
		invalid("ProbeInterval", "want 0 < probe_interval <= max_probe_interval, got %s and %s", c.ProbeInterval, c.MaxProbeInterval)
	}
	return c, errs
}

// thresholds are c's opening thresholds for package breaker.
func (c CircuitBreaker) thresholds() breaker.Thresholds {
	return breaker.Thresholds{Consecutive: c.ConsecutiveFailures, Ratio: c.FailureRatio,
		MinDeliveries: c.MinDeliveries, Window: c.Window}
}

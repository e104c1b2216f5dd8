package core

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Relay defaults. Every one can be changed in Config.
const (
	// DefaultBatchSize is how many rows one claim statement takes at most.
	DefaultBatchSize = 1000
	// DefaultLease is how long a claimed row belongs to its relay. A relay
	// that dies holding rows delays them by at most this long.
	DefaultLease = 30 * time.Second
	// DefaultPollInterval is how often an idle relay looks for work it was
	// not notified of (missed notifications, delayed and retried rows).
	DefaultPollInterval = time.Second
	// DefaultConcurrency bounds a relay's concurrent deliveries.
	DefaultConcurrency = 64
	// DefaultSentRetention is how long delivered rows are kept (dedup keys
	// stay taken while their row exists).
	DefaultSentRetention = 24 * time.Hour
	// DefaultMaintenanceInterval is how often the elected relay prunes.
	DefaultMaintenanceInterval = time.Minute
	// DefaultShutdownTimeout bounds how long Run waits for in-flight
	// deliveries after its context is cancelled.
	DefaultShutdownTimeout = 30 * time.Second
)

// Config configures a Relay. Zero fields take the defaults above.
type Config struct {
	// Outbox is the outbox to relay; nil means Default.
	Outbox *Outbox
	// Sinks are the configured sink instances. The relay claims only their
	// rows; a row naming any other sink waits, untouched, for a relay that
	// has it (see Outbox.UnconfiguredSinks).
	Sinks []SinkConfig

	BatchSize    int
	Lease        time.Duration
	PollInterval time.Duration
	// Concurrency bounds deliveries in flight on this relay.
	Concurrency int

	// SentRetention is how long sent rows are kept before maintenance
	// deletes them.
	SentRetention       time.Duration
	MaintenanceInterval time.Duration
	ShutdownTimeout     time.Duration

	// Logger receives the relay's logs; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider and MeterProvider are the application's; nil means the
	// global ones (no-ops unless the application installed its own).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// DurableRelayWrites makes the relay's own writes (claims, terminal
	// writes) wait for the WAL flush like ordinary commits. By default they
	// do not (synchronous_commit = off on the relay's connections): a
	// PostgreSQL crash can then forget the last fraction of a second of
	// relay writes, which only means those rows are delivered again, while
	// the relay no longer waits for a disk flush per batch.
	DurableRelayWrites bool
	// DeleteOnSent deletes a row as soon as it is delivered instead of
	// marking it sent (cheaper for PostgreSQL: no new row version). The
	// dedup key then only guards against duplicates while the row is
	// undelivered, and SentRetention has nothing to prune.
	DeleteOnSent bool
	// LinkProducerSpan makes each delivery span the root of its own trace,
	// linked to the producer's span, instead of the producer span's child.
	LinkProducerSpan bool
}

func (c Config) withDefaults() (Config, map[string]SinkConfig, error) {
	if c.Outbox == nil {
		c.Outbox = Default
	}
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.Lease, DefaultLease)
	setDefault(&c.PollInterval, DefaultPollInterval)
	setDefault(&c.Concurrency, DefaultConcurrency)
	setDefault(&c.SentRetention, DefaultSentRetention)
	setDefault(&c.MaintenanceInterval, DefaultMaintenanceInterval)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.BatchSize < 0 || c.Lease < 0 || c.PollInterval < 0 || c.Concurrency < 0 {
		return c, nil, fmt.Errorf("outbox: relay config: negative batch size, lease, poll interval or concurrency")
	}
	sinks := make(map[string]SinkConfig, len(c.Sinks))
	for _, s := range c.Sinks {
		limit := c.Concurrency
		if _, batches := s.Sink.(BatchSink); batches {
			limit = max(limit, c.BatchSize)
		}
		s, err := s.withDefaults(limit)
		if err != nil {
			return c, nil, err
		}
		if _, dup := sinks[s.Name]; dup {
			return c, nil, fmt.Errorf("outbox: sink %q configured twice", s.Name)
		}
		sinks[s.Name] = s
	}
	return c, sinks, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

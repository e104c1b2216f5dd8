package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/sink"
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
	// DefaultMaxClaimBytes bounds the payload bytes one claim brings into
	// the relay: BatchSize rows of the largest payload (256 KiB) would be
	// 250 MiB a claim, and a claim loop holds up to two claims waiting
	// besides its deliveries. 16 MiB leaves full batches to payloads of
	// up to 16 KiB, and 64 rows a claim at the payload limit.
	DefaultMaxClaimBytes = 16 << 20
	// DefaultSentRetention is how long delivered rows are kept (dedup keys
	// stay taken as long).
	DefaultSentRetention = 24 * time.Hour
	// DefaultThreadRetention is how long a thread (see Event.ThreadKey) is
	// kept after its last delivered row; a later event of its key then
	// starts a new conversation.
	DefaultThreadRetention = 30 * 24 * time.Hour
	// DefaultMaintenanceInterval is how often the elected relay prunes.
	DefaultMaintenanceInterval = time.Minute
	// DefaultShutdownTimeout bounds how long Run waits for in-flight
	// deliveries after its context is cancelled.
	DefaultShutdownTimeout = 30 * time.Second
)

// Config configures a Relay. Zero fields take the defaults above. The
// outbox it relays is that of the front door that makes it
// (outboxd.Outbox.NewRelay): its schema is declared there, once.
type Config struct {
	// Sinks are the configured sink instances. The relay claims only their
	// rows; a row naming any other sink waits, untouched, for a relay that
	// has it (see operator.Operator.UnconfiguredSinks).
	Sinks []SinkConfig

	BatchSize    int
	Lease        time.Duration
	PollInterval time.Duration
	// Concurrency bounds deliveries in flight on this relay.
	Concurrency int
	// MaxClaimBytes bounds the payload bytes of one claim: a claim loop
	// takes fewer than BatchSize rows when its last claim's payloads say
	// BatchSize of them would hold more (see claimSize). It holds at most
	// its deliveries in flight plus about two claims' worth waiting.
	MaxClaimBytes int

	// SentRetention is how long delivered rows (in messages_history) and
	// their dedup keys are kept: maintenance truncates a history slot once
	// all its rows are older, so a row is kept between SentRetention and
	// 1.25 times it.
	SentRetention time.Duration
	// ThreadRetention is how long a thread is kept after its last
	// delivered row.
	ThreadRetention     time.Duration
	MaintenanceInterval time.Duration
	ShutdownTimeout     time.Duration
	// StatsInterval is how often the cluster's row counts are recomputed
	// (by one relay) and each relay adds its delivery counts to the
	// per-minute table; zero means operator.DefaultStatsInterval.
	StatsInterval time.Duration

	// Logger receives the relay's logs; nil means slog.Default().
	Logger *slog.Logger
	// TracerProvider and MeterProvider are the application's; nil means the
	// global ones (no-ops unless the application installed its own).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// DurableRelayWrites makes the relay's terminal writes wait for the
	// WAL flush like ordinary commits. By default they do not
	// (synchronous_commit = off on the relay's connections): a PostgreSQL
	// crash can then forget the last fraction of a second of them, which
	// only means those rows are delivered again as uncertain retries, while
	// the relay waits for no disk flush per finished batch. So do claims,
	// but those of a sink that checks Uncertain attempts
	// (sink.UncertainChecker, see claim.sql): for such a sink a forgotten
	// claim would hide a delivery that may have started. With
	// DurableRelayWrites every claim waits for the flush too.
	DurableRelayWrites bool
	// DeleteOnSent deletes a row and its dedup key as soon as it is
	// delivered instead of moving it to messages_history (cheaper for
	// PostgreSQL: no history row). The dedup key then only guards against
	// duplicates while the row is undelivered, and SentRetention has
	// nothing to prune.
	DeleteOnSent bool
	// LinkProducerSpan makes each delivery span the root of its own trace,
	// linked to the producer's span, instead of the producer span's child.
	LinkProducerSpan bool

	// Redact, when set, rewrites the text of every delivery error before
	// the relay stores it in the row, logs it or records it in the
	// delivery's span: the binary passes its secret scrubber, so a sink
	// whose error quotes one of its secrets leaks it nowhere.
	Redact func(text string) string

	// Stage, when set, prepares every delivery before the relay names its
	// rate key or hands it to its sink: package routing renders a
	// published row's event into its sink's payload this way.
	Stage Stage

	// Fallbacks are the route targets' fallbacks (package routing builds
	// them from plugins.yaml's fallback and fallback_after).
	Fallbacks []Fallback
}

// FieldError is a field of a Config, or of one of its SinkConfigs, whose
// value is out of range. Effective reports every one it finds.
type FieldError struct {
	// Sink names the SinkConfig the field belongs to; "" for a field of
	// Config itself.
	Sink string
	// Field is the field's name in Config or SinkConfig, with the sub-field
	// where there is one: "BatchSize", "Backoff", "RateLimit.Per".
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Sink == "" {
		return fmt.Sprintf("outbox: relay config: %s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("outbox: sink %q: %s: %v", e.Sink, e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// Effective returns c's numbers and delivery policies as a Relay runs them:
// zero fields take the defaults above, and each sink's policy is completed
// as [SinkConfig] describes. Every field out of range is reported, each as a
// *FieldError, joined with errors.Join. A SinkConfig without a Sink is
// checked too (NewRelay refuses it), so that a configuration can be checked
// before its sinks exist.
func (c Config) Effective() (Config, error) {
	setDefault(&c.BatchSize, DefaultBatchSize)
	setDefault(&c.Lease, DefaultLease)
	setDefault(&c.PollInterval, DefaultPollInterval)
	setDefault(&c.Concurrency, DefaultConcurrency)
	setDefault(&c.MaxClaimBytes, DefaultMaxClaimBytes)
	setDefault(&c.SentRetention, DefaultSentRetention)
	setDefault(&c.ThreadRetention, DefaultThreadRetention)
	setDefault(&c.MaintenanceInterval, DefaultMaintenanceInterval)
	setDefault(&c.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&c.StatsInterval, operator.DefaultStatsInterval)
	var errs []error
	for _, f := range []struct {
		name     string
		negative bool
		value    any
	}{
		{"BatchSize", c.BatchSize < 0, c.BatchSize},
		{"Lease", c.Lease < 0, c.Lease},
		{"PollInterval", c.PollInterval < 0, c.PollInterval},
		{"Concurrency", c.Concurrency < 0, c.Concurrency},
		{"MaxClaimBytes", c.MaxClaimBytes < 0, c.MaxClaimBytes},
		{"SentRetention", c.SentRetention < 0, c.SentRetention},
		{"ThreadRetention", c.ThreadRetention < 0, c.ThreadRetention},
		{"MaintenanceInterval", c.MaintenanceInterval < 0, c.MaintenanceInterval},
		{"ShutdownTimeout", c.ShutdownTimeout < 0, c.ShutdownTimeout},
		{"StatsInterval", c.StatsInterval < 0, c.StatsInterval},
	} {
		if f.negative {
			errs = append(errs, &FieldError{Field: f.name, Err: fmt.Errorf("must not be negative, got %v", f.value)})
		}
	}
	sinks := make([]SinkConfig, len(c.Sinks))
	for i, s := range c.Sinks {
		limit := c.Concurrency
		if _, batches := s.Sink.(sink.BatchSink); batches {
			limit = max(limit, c.BatchSize)
		}
		var sinkErrs []error
		sinks[i], sinkErrs = s.effective(limit)
		errs = append(errs, sinkErrs...)
	}
	c.Sinks = sinks
	return c, errors.Join(errs...)
}

func (c Config) withDefaults() (Config, map[string]SinkConfig, error) {
	c, err := c.Effective()
	if err != nil {
		return c, nil, err
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	sinks := make(map[string]SinkConfig, len(c.Sinks))
	for _, s := range c.Sinks {
		if s.Sink == nil {
			return c, nil, fmt.Errorf("outbox: sink %q: no Sink", s.Name)
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

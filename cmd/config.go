package cmd

import (
	"time"

	"github.com/outboxd/outboxd/core"
)

// Defaults of the binary that the core does not already define.
const (
	// DefaultConfigFile is read when neither --config nor OUTBOX_CONFIG names
	// a file. When it does not exist, the built-in defaults apply.
	DefaultConfigFile = "plugins.yaml"
	// ConfigFileEnv names the environment variable that replaces
	// DefaultConfigFile.
	ConfigFileEnv = "OUTBOX_CONFIG"
	// EnvOverridePrefix starts the environment variables that override
	// configuration keys: OUTBOX_RELAY_BATCH_SIZE sets relay.batch_size.
	EnvOverridePrefix = "OUTBOX_"
	// DefaultListen is where the HTTP API listens unless http.listen says
	// otherwise: loopback, so an unconfigured server is never exposed.
	DefaultListen = "127.0.0.1:8080"
	// DefaultServiceName names the process in traces and metrics.
	DefaultServiceName = "outboxd"
)

// Config is the parsed, expanded and validated plugins.yaml.
type Config struct {
	Database  DatabaseConfig      `mapstructure:"database"`
	Relay     RelayConfig         `mapstructure:"relay"`
	Retention RetentionConfig     `mapstructure:"retention"`
	HTTP      HTTPConfig          `mapstructure:"http"`
	Telemetry TelemetryConfig     `mapstructure:"telemetry"`
	Sinks     map[string]SinkSpec `mapstructure:"sinks"`

	// File is where the configuration came from ("" for built-in defaults).
	File string `mapstructure:"-"`
	// secrets are the secret values found while loading; every output of
	// the binary is scrubbed of them.
	secrets []string
}

// DatabaseConfig is the database block.
type DatabaseConfig struct {
	// URL is a PostgreSQL connection string; see databaseURL for the
	// precedence of the flag and environment variables over it.
	URL string `mapstructure:"url"`
	// Schema holds the outbox tables.
	Schema string `mapstructure:"schema"`
}

// RelayConfig is the relay block; zero values take the core defaults.
type RelayConfig struct {
	BatchSize    int           `mapstructure:"batch_size"`
	Lease        time.Duration `mapstructure:"lease"`
	PollInterval time.Duration `mapstructure:"poll_interval"`
	Concurrency  int           `mapstructure:"concurrency"`
	// ShutdownTimeout bounds how long serve waits for in-flight deliveries
	// after SIGTERM (core.Config.ShutdownTimeout).
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// DeleteOnSent deletes delivered rows instead of marking them sent
	// (core.Config.DeleteOnSent): cheaper, but a dedup key is then only
	// guarded while its row is undelivered.
	DeleteOnSent bool `mapstructure:"delete_on_sent"`
	// DurableWrites makes the relay's claims and outcome writes wait for
	// the WAL flush (core.Config.DurableRelayWrites). Off, a PostgreSQL
	// crash can only cause redeliveries, never losses.
	DurableWrites bool `mapstructure:"durable_writes"`
}

// RetentionConfig is the retention block.
type RetentionConfig struct {
	// Sent is how long delivered rows are kept.
	Sent time.Duration `mapstructure:"sent"`
}

// HTTPConfig is the http block.
type HTTPConfig struct {
	Listen string `mapstructure:"listen"`
	// Token, when set, is required as a bearer token on /v1/*.
	Token string `mapstructure:"token"`
	// AllowedHosts are the host names (besides loopback names and
	// addresses) the API answers to in the Host header; see hostGuard.
	AllowedHosts []string `mapstructure:"allowed_hosts"`
}

// TelemetryConfig is the telemetry block. The standard OTEL_* environment
// variables take precedence over it.
type TelemetryConfig struct {
	ServiceName  string `mapstructure:"service_name"`
	OTLPEndpoint string `mapstructure:"otlp_endpoint"`
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol string `mapstructure:"protocol"`
	// LinkProducerSpan makes each delivery span the root of its own trace,
	// linked to the producer's span, instead of its child
	// (core.Config.LinkProducerSpan).
	LinkProducerSpan bool `mapstructure:"link_producer_span"`
}

// SinkSpec is one entry of the sinks block.
type SinkSpec struct {
	Type        string         `mapstructure:"type"`
	MaxAttempts int            `mapstructure:"max_attempts"`
	Backoff     BackoffSpec    `mapstructure:"backoff"`
	RateLimit   *RateLimitSpec `mapstructure:"rate_limit"`
	MaxInFlight int            `mapstructure:"max_in_flight"`
	// Options are decoded by the sink type's factory.
	Options map[string]any `mapstructure:"options"`
}

// BackoffSpec is a sink's backoff block.
type BackoffSpec struct {
	Initial time.Duration `mapstructure:"initial"`
	Max     time.Duration `mapstructure:"max"`
}

// RateLimitSpec is a sink's rate_limit block.
type RateLimitSpec struct {
	Rate  int           `mapstructure:"rate"`
	Per   time.Duration `mapstructure:"per"`
	Burst int           `mapstructure:"burst"`
}

// withDefaults fills what the file left out, so `config show` prints the
// values the process really uses.
func (c *Config) withDefaults() {
	setZero(&c.Database.Schema, core.DefaultSchema)
	setZero(&c.Relay.BatchSize, core.DefaultBatchSize)
	setZero(&c.Relay.Lease, core.DefaultLease)
	setZero(&c.Relay.PollInterval, core.DefaultPollInterval)
	setZero(&c.Relay.Concurrency, core.DefaultConcurrency)
	setZero(&c.Relay.ShutdownTimeout, core.DefaultShutdownTimeout)
	setZero(&c.Retention.Sent, core.DefaultSentRetention)
	setZero(&c.HTTP.Listen, DefaultListen)
	setZero(&c.Telemetry.ServiceName, DefaultServiceName)
	for name, s := range c.Sinks {
		setZero(&s.MaxAttempts, core.DefaultMaxAttempts)
		setZero(&s.Backoff.Initial, core.DefaultBackoffInitial)
		setZero(&s.Backoff.Max, core.DefaultBackoffMax)
		if s.RateLimit != nil {
			setZero(&s.RateLimit.Burst, core.DefaultRateBurst)
		}
		c.Sinks[name] = s
	}
}

func setZero[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

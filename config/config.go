// Package config is outboxd's configuration: plugins.yaml loaded with
// viper, every key's place in the file (line and column) for messages,
// ${VAR} expansion, OUTBOXD_* overrides, validation of every key, sink and
// route at once, and the effective configuration with its secrets redacted
// (`outboxd config show`). The keys are declared once, as the fields of
// [Config], the way package confschema describes.
package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/routing"
)

//go:generate go run ./internal/configdocs -o ../docs/configuration.md

// Defaults of the binary that the core does not already define.
const (
	// DefaultFile is read when neither --config nor OUTBOXD_CONFIG names a
	// file. Serve, config check, enqueue and publish refuse to run when it
	// does not exist (a mount that went missing must not start a relay with
	// no sinks); the commands that need only the database run without it.
	DefaultFile = "plugins.yaml"
	// FileEnv names the environment variable that replaces DefaultFile.
	FileEnv = EnvOverridePrefix + "CONFIG"
	// EnvOverridePrefix starts the environment variables that override
	// configuration keys, the binary's name: OUTBOXD_RELAY_BATCH_SIZE sets
	// relay.batch_size.
	EnvOverridePrefix = "OUTBOXD_"
	// DeprecatedEnvPrefix is the prefix of earlier releases, still read
	// (with a warning) where no OUTBOXD_ variable of the same key is set.
	DeprecatedEnvPrefix = "OUTBOX_"
	// DefaultListen is where the HTTP API listens unless http.listen says
	// otherwise: loopback, so an unconfigured server is never exposed.
	DefaultListen = "127.0.0.1:8080"
	// DefaultQueryTimeout bounds each database statement of the HTTP API
	// and the console (http.query_timeout): their pool is small, and one
	// slow query (a lock, a search over a large table) must not hold a
	// connection the next request needs. Ten seconds is far above what
	// their queries take on a healthy database and well inside the
	// server's write timeout, so the client gets the answer.
	DefaultQueryTimeout = 10 * time.Second
	// DefaultServiceName names the process in traces and metrics.
	DefaultServiceName = "outboxd"
	// DefaultProtocol is the OTLP protocol unless telemetry.protocol or
	// OTEL_EXPORTER_OTLP_PROTOCOL says otherwise.
	DefaultProtocol = ProtocolHTTP
)

// OTLP protocols, as spelled by OTEL_EXPORTER_OTLP_PROTOCOL and
// telemetry.protocol.
const (
	ProtocolHTTP = "http/protobuf" // the default, port 4318
	ProtocolGRPC = "grpc"          // port 4317
)

// Config is the parsed, expanded, validated and effective plugins.yaml.
//
// Every key of the file is declared here once, as a field with a
// mapstructure tag (its name) and a doc tag (its line in
// docs/configuration.md), as package confschema describes: decoding, the
// refusal of unknown keys, environment overrides, `outboxd config show` and
// the documentation all derive from these declarations. A key whose value
// goes to core is copied to its relay.Config (or relay.SinkConfig) field in
// core.go: core fills its default and checks its range, so neither is
// repeated here. The other defaults are in defaultConfig. To add a key,
// add a field (with its default here or its copy in core.go) and run `go
// generate ./config`.
type Config struct {
	Database  DatabaseConfig  `mapstructure:"database"`
	Relay     RelayConfig     `mapstructure:"relay"`
	Retention RetentionConfig `mapstructure:"retention"`
	HTTP      HTTPConfig      `mapstructure:"http"`
	Telemetry TelemetryConfig `mapstructure:"telemetry"`
	// Destinations holds for every tenant's destinations (destinations.go).
	Destinations DestinationsConfig  `mapstructure:"destinations"`
	Sinks        map[string]SinkSpec `mapstructure:"sinks"`
	// Routes are declared by package routing; every command compiles them
	// against the built sinks when it loads the configuration.
	Routes          map[string]routing.Route `mapstructure:"routes" doc:"published events' routes, by name: which events go to which sinks and how each looks there (docs/events.md); names keep their case"`
	RoutesUnmatched string                   `mapstructure:"routes_unmatched" doc:"publishing an event that no route matches: error refuses it, drop makes it a no-op counted in outbox_events_dropped_total"`
	// EventTypeSpecs is the catalog of event types tenants may subscribe
	// to (event_types.go).
	EventTypeSpecs []EventTypeSpec `mapstructure:"event_types" doc:"the event types tenants may subscribe to, each with a description, an example of its data and optionally a JSON Schema: the portal's catalog and subscription form, and what a test event of a type sends (docs/destinations.md)"`

	// File is where the configuration came from ("" for built-in defaults).
	File string `mapstructure:"-"`
	// secrets are the secret values found while loading; every output of
	// the binary is scrubbed of them.
	secrets []string
	// sinks are the configured sinks, built, with their effective policies.
	sinks []relay.SinkConfig
	// routes are Routes and RoutesUnmatched, compiled against sinks.
	routes *routing.Table
	// eventTypes are EventTypeSpecs checked, as the catalog holds them.
	eventTypes destinations.Catalog
}

// DatabaseConfig is the database block.
type DatabaseConfig struct {
	// URL is a PostgreSQL connection string; see databaseURL for the
	// precedence of the flag and environment variables over it.
	URL string `mapstructure:"url" defaultdoc:"libpq PG* variables" doc:"PostgreSQL URL; --database-url, OUTBOXD_DATABASE_URL and DATABASE_URL take precedence"`
	// Schema holds the outbox tables.
	Schema string `mapstructure:"schema" doc:"PostgreSQL schema holding the outbox tables, a lower-case identifier"`
}

// RelayConfig is the relay block; core fills the defaults and checks the
// ranges.
type RelayConfig struct {
	BatchSize    int           `mapstructure:"batch_size" doc:"rows claimed per statement"`
	Lease        time.Duration `mapstructure:"lease" doc:"how long a claimed row belongs to its relay: a relay that dies delays its rows at most this long"`
	PollInterval time.Duration `mapstructure:"poll_interval" doc:"how often an idle relay looks for missed notifications and for delayed or retried rows"`
	Concurrency  int           `mapstructure:"concurrency" doc:"deliveries in flight per process"`
	// MaxClaimBytes is relay.Config.MaxClaimBytes.
	MaxClaimBytes int `mapstructure:"max_claim_bytes" doc:"payload bytes one claim brings into the relay, estimated from the last claim's payloads: large payloads make claims smaller than batch_size, so a relay holds about its deliveries in flight plus two claims of this size, not batch_size x payload size"`
	// ShutdownTimeout bounds how long serve waits for in-flight deliveries
	// after SIGTERM (relay.Config.ShutdownTimeout).
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout" doc:"on SIGTERM or SIGINT, and for the previous configuration's relay after a reload, how long serve waits for in-flight deliveries; their leases then expire and another relay retries them"`
	// DeleteOnSent deletes delivered rows instead of moving them to history
	// (relay.Config.DeleteOnSent): cheaper, but a dedup key is then only
	// guarded while its row is undelivered.
	DeleteOnSent bool `mapstructure:"delete_on_sent" doc:"delete a row once delivered instead of moving it to the delivered history: cheaper for PostgreSQL, but its dedup key then only stops duplicates while the row is undelivered"`
	// DurableWrites makes the relay's claims and outcome writes wait for
	// the WAL flush (relay.Config.DurableRelayWrites). Off, a PostgreSQL
	// crash can only cause redeliveries, never losses.
	DurableWrites bool `mapstructure:"durable_writes" doc:"make the relay's claims and outcome writes wait for the WAL flush; off, a PostgreSQL crash can cause redeliveries, never losses"`
}

// RetentionConfig is the retention block.
type RetentionConfig struct {
	// Sent is how long delivered rows are kept.
	Sent time.Duration `mapstructure:"sent" doc:"how long delivered rows, and so their dedup keys, are kept (retention truncates history in slots of a quarter of it, so a row stays up to 1.25 times as long)"`
	// Threads is how long a thread of published events is kept after its
	// last delivered row.
	Threads time.Duration `mapstructure:"threads" doc:"how long a thread (events sharing a thread_key) is remembered after its last delivered row; a later event of its key then starts a new one"`
}

// HTTPConfig is the http block.
type HTTPConfig struct {
	Listen string `mapstructure:"listen" doc:"address of the HTTP API; one that is not loopback needs http.token, http.tokens or http.trusted_proxy"`
	// Token, when set, is required as a bearer token on /v1/*: the one
	// admin token, named LegacyTokenName.
	Token confschema.Secret `mapstructure:"token" doc:"bearer token required on /v1/* when set: an admin token named admin, beside http.tokens"`
	// Tokens are the named bearer tokens, each with its role.
	Tokens []TokenSpec `mapstructure:"tokens" doc:"named bearer tokens, each with a role: read (stats, lookups, listings), produce (enqueue, publish), operate (read, pause, resume, redrive, purge) or admin (everything); see docs/operations.md"`
	// TrustedProxy, when set, believes the user and role an
	// authenticating proxy names in headers.
	TrustedProxy *TrustedProxySpec `mapstructure:"trusted_proxy"`
	// AllowedHosts are the host names (besides loopback names and
	// addresses) the API answers to in the Host header; see hostGuard.
	AllowedHosts []string `mapstructure:"allowed_hosts" doc:"host names accepted in the Host header besides localhost and loopback addresses: others get 421 (DNS rebinding); with a public listen, names not listed are refused and IP addresses pass"`
	// UI serves the operator console (package console) at /.
	UI bool `mapstructure:"ui" doc:"serve the operator console (docs/console.md) at / on the API's port; false turns it off, the API stays"`
	// QueryTimeout is the statement_timeout of the API's and the console's
	// own connections (package apidb).
	QueryTimeout time.Duration `mapstructure:"query_timeout" doc:"longest a database statement of the HTTP API or the console may run (statement_timeout on their own connections, never the relay's nor a producer's): a slower one is cancelled and answered 503, so it cannot hold their small pool"`
}

// TokenSpec is one entry of http.tokens.
type TokenSpec struct {
	Name string `mapstructure:"name" defaultdoc:"required" doc:"who holds the token: named in the audit trail and the console; letters, digits, '.', '_', '@' and '-'"`
	// Token and SHA256 give the value, one or the other.
	Token  confschema.Secret `mapstructure:"token" doc:"the token (a secret: use ${VAR}); or give sha256"`
	SHA256 confschema.Secret `mapstructure:"sha256" doc:"instead of token, the hex SHA-256 of the token (printf %s TOKEN | sha256sum), so the file holds no token"`
	Role   string            `mapstructure:"role" defaultdoc:"required" doc:"read, produce, operate or admin"`
}

// TrustedProxySpec is the http.trusted_proxy block: an authenticating
// proxy (oauth2-proxy, an ingress with single sign-on) that names the
// user in a header.
type TrustedProxySpec struct {
	UserHeader  string   `mapstructure:"user_header" defaultdoc:"required" doc:"header carrying the signed-in user's name, e.g. X-Forwarded-User"`
	RoleHeader  string   `mapstructure:"role_header" doc:"header carrying the user's role (read, produce, operate or admin), e.g. X-Forwarded-Role"`
	DefaultRole string   `mapstructure:"default_role" doc:"the role of a user whose request has no role header"`
	Sources     []string `mapstructure:"sources" defaultdoc:"required" doc:"the proxy's addresses, as CIDRs or addresses: the headers of requests from anywhere else are ignored"`
}

// TelemetryConfig is the telemetry block. The standard OTEL_* environment
// variables take precedence over it.
type TelemetryConfig struct {
	ServiceName  string `mapstructure:"service_name" doc:"service.name of spans and metrics (OTEL_SERVICE_NAME wins)"`
	OTLPEndpoint string `mapstructure:"otlp_endpoint" doc:"OTLP collector, host:port or URL; none means no export (OTEL_EXPORTER_OTLP_ENDPOINT wins)"`
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol string `mapstructure:"protocol" doc:"OTLP protocol, http/protobuf or grpc (OTEL_EXPORTER_OTLP_PROTOCOL wins)"`
	// LinkProducerSpan makes each delivery span the root of its own trace,
	// linked to the producer's span, instead of its child
	// (relay.Config.LinkProducerSpan).
	LinkProducerSpan bool `mapstructure:"link_producer_span" doc:"make each delivery its own trace, linked to the producer's span, instead of the producer span's child"`
	// TraceURL links the console's message pages to their trace.
	TraceURL string `mapstructure:"trace_url" defaultdoc:"none: no link" doc:"link each message in the console to its trace: {trace_id} is replaced by the message's trace id, e.g. http://jaeger:16686/trace/{trace_id}"`
}

// TraceIDPlaceholder is what telemetry.trace_url's {trace_id} stands for.
const TraceIDPlaceholder = "{trace_id}"

// SinkSpec is one entry of the sinks block; core fills the policy's
// defaults and checks its ranges.
type SinkSpec struct {
	Type        string `mapstructure:"type" defaultdoc:"required" doc:"a registered sink type (the sink types below, or a custom build's own)"`
	MaxAttempts int    `mapstructure:"max_attempts" doc:"attempts before a message is dead-lettered"`
	// MaxDeferrals is relay.SinkConfig.MaxDeferrals.
	MaxDeferrals int            `mapstructure:"max_deferrals" doc:"times one message may be put off, spending no attempt and each waiting at least the backoff, before it is dead-lettered: each Retry-After answer counts one, and so does each last attempt spared because the receiver looked down (refused or reset connection, timeout, 408, 502-504, 429 without Retry-After) while its circuit breaker was closed; a receiver that answers 429 or 503 forever cannot hold rows forever"`
	Backoff      BackoffSpec    `mapstructure:"backoff"`
	RateLimit    *RateLimitSpec `mapstructure:"rate_limit"`
	MaxInFlight  int            `mapstructure:"max_in_flight" defaultdoc:"relay.concurrency" doc:"concurrent deliveries of this sink per process"`
	// CircuitBreaker is relay.SinkConfig.CircuitBreaker.
	CircuitBreaker CircuitBreakerSpec `mapstructure:"circuit_breaker"`
	// Digest is relay.SinkConfig.Digest; its template is a route target's
	// only (config check refuses one here).
	Digest *routing.Digest `mapstructure:"digest" doc:"deliver the sink's rows of one key that arrive together, or wait behind its rate limit, as one message: window, max_messages and key (see docs/digests.md)"`
	// Options are decoded by the sink type's factory.
	Options map[string]any `mapstructure:"options" doc:"the sink type's own options (see the sink types below); names keep their case"`
}

// BackoffSpec is a sink's backoff block (relay.Backoff).
type BackoffSpec struct {
	Initial time.Duration `mapstructure:"initial" doc:"first retry delay; later ones double, with jitter"`
	Max     time.Duration `mapstructure:"max" doc:"longest retry delay"`
}

// CircuitBreakerSpec is a sink's circuit_breaker block
// (relay.CircuitBreaker): when the cluster stops delivering to a
// receiver that is down, and how often it probes it.
type CircuitBreakerSpec struct {
	// Enabled is a pointer so that an absent key takes core's default (on).
	Enabled             *bool         `mapstructure:"enabled" doc:"stop delivering to a receiver that is down (rows wait pending, attempts untouched) and probe it with one message per probe interval; false spends attempts through any outage"`
	ConsecutiveFailures int           `mapstructure:"consecutive_failures" doc:"open after this many deliveries in a row found the receiver down (refused, reset, DNS, TLS, timeout, 502/503/504) or answered Retry-After"`
	FailureRatio        float64       `mapstructure:"failure_ratio" doc:"open when this share of the deliveries within window failed (any 5xx counts; a message's own 4xx never does)"`
	MinDeliveries       int           `mapstructure:"min_deliveries" doc:"deliveries within window before failure_ratio applies, so a few poison messages cannot open it"`
	Window              time.Duration `mapstructure:"window" doc:"the span failure_ratio is counted over"`
	ProbeInterval       time.Duration `mapstructure:"probe_interval" doc:"wait before an open breaker's first probe; each failed probe doubles it"`
	MaxProbeInterval    time.Duration `mapstructure:"max_probe_interval" doc:"longest wait between two probes"`
}

// RateLimitSpec is a sink's rate_limit block (sink.RateLimit). Without
// one, a sink type that has its own limit (Slack's one message per second)
// gets it, and other sinks are unlimited.
type RateLimitSpec struct {
	Rate   int           `mapstructure:"rate" defaultdoc:"the sink type's own, else no limit" doc:"deliveries per per, across the whole cluster"`
	Per    time.Duration `mapstructure:"per" defaultdoc:"the sink type's own" doc:"the period of rate"`
	Burst  int           `mapstructure:"burst" doc:"deliveries that may start back to back after an idle spell"`
	PerKey bool          `mapstructure:"per_key" doc:"apply the limit to each key the sink names on its own (Slack: each channel, destinations: each destination) instead of to the sink as a whole"`
}

// check reports what the declarations cannot say about the keys the binary
// owns (core checks its own).
func (c *Config) check() []confschema.Problem {
	var problems []confschema.Problem
	switch c.Telemetry.Protocol {
	case ProtocolHTTP, ProtocolGRPC:
	default:
		problems = append(problems, confschema.Problem{Key: "telemetry.protocol",
			Message: fmt.Sprintf("want %q or %q, got %q", ProtocolHTTP, ProtocolGRPC, c.Telemetry.Protocol)})
	}
	if c.HTTP.QueryTimeout <= 0 {
		problems = append(problems, confschema.Problem{Key: "http.query_timeout",
			Message: fmt.Sprintf("must be positive, got %s", c.HTTP.QueryTimeout)})
	}
	if _, err := store.New(c.Database.Schema); err != nil {
		// serve would refuse it only when it opens the outbox.
		problems = append(problems, confschema.Problem{Key: "database.schema", Message: strings.TrimPrefix(err.Error(), "outbox: ")})
	}
	problems = append(problems, c.HTTP.checkAccess()...)
	problems = append(problems, c.checkDigests()...)
	problems = append(problems, c.checkDestinations()...)
	problems = append(problems, c.checkEventTypes()...)
	if u := c.Telemetry.TraceURL; u != "" {
		parsed, err := url.Parse(strings.ReplaceAll(u, TraceIDPlaceholder, "0"))
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || !strings.Contains(u, TraceIDPlaceholder) {
			problems = append(problems, confschema.Problem{Key: "telemetry.trace_url",
				Message: fmt.Sprintf("want an http(s) URL containing %s, like http://jaeger:16686/trace/%s, got %q", TraceIDPlaceholder, TraceIDPlaceholder, u)})
		}
	}
	return problems
}

// defaultConfig holds the defaults of the keys core does not own; decoding
// starts from it.
func defaultConfig() *Config {
	return &Config{
		Database:        DatabaseConfig{Schema: outboxd.DefaultSchema},
		HTTP:            HTTPConfig{Listen: DefaultListen, UI: true, QueryTimeout: DefaultQueryTimeout},
		Telemetry:       TelemetryConfig{ServiceName: DefaultServiceName, Protocol: DefaultProtocol},
		RoutesUnmatched: routing.UnmatchedError,
		Destinations:    DestinationsConfig{Quotas: QuotasConfig(destinations.DefaultQuotas())},
	}
}

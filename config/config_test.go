package config

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/secret"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks/builtin"
)

// anyOptionsType is a sink type, registered for these tests, that takes any
// options, like a custom sink that does not decode them.
const anyOptionsType = "test-any-options"

func init() {
	builtin.Register()
	registry.Register(registry.Type{Name: anyOptionsType, New: func(string, map[string]any, sink.Env) (sink.Sink, error) {
		return sink.Func(func(context.Context, *sink.Delivery) error { return nil }), nil
	}})
}

const minimalConfig = `
database:
  schema: demo
sinks:
  audit:
    type: log
`

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // substrings of the error
	}{
		{"typo in a top-level key", "relay:\n  bach_size: 10\n",
			nil, []string{"unknown key relay.bach_size", "did you mean relay.batch_size?", "test.yaml"}},
		{"typo in a sink key", "sinks:\n  a:\n    type: log\n    max_atempts: 3\n",
			nil, []string{"unknown key sinks.a.max_atempts", "did you mean sinks.a.max_attempts?"}},
		{"unknown section", "relais:\n  lease: 1s\n",
			nil, []string{"unknown key relais.lease", "did you mean relay.lease?"}},
		{"bad duration", "relay:\n  lease: 30 seconds\n",
			nil, []string{"relay.lease", `"30 seconds"`, "duration"}},
		{"duration without unit", "retention:\n  sent: 30\n",
			nil, []string{"retention.sent", "with a unit"}},
		{"bad duration in a sink", "sinks:\n  a:\n    type: log\n    backoff: {initial: soon, max: 1m}\n",
			nil, []string{"sinks.a.backoff.initial", `"soon"`}},
		{"wrong type", "relay:\n  batch_size: [1, 2]\n",
			nil, []string{"relay.batch_size"}},
		{"string for a number", "relay:\n  concurrency: lots\n",
			nil, []string{"relay.concurrency", `want a whole number, got "lots"`}},
		{"missing env var", "http:\n  token: ${API_TOKEN}\n",
			nil, []string{"http.token: environment variable API_TOKEN is not set", "${API_TOKEN:-default}"}},
		{"missing env var in a flow mapping", "sinks:\n  a:\n    type: log\n    options: {token: ${SLACK_TOKEN}}\n",
			nil, []string{"sinks.a.options.token: environment variable SLACK_TOKEN is not set"}},
		{"unknown sink type", "sinks:\n  a:\n    type: carrier-pigeon\n",
			nil, []string{`sinks.a.type: unknown sink type "carrier-pigeon"`, "registered types:", "discard", "log"}},
		{"sink without type", "sinks:\n  a:\n    max_attempts: 3\n",
			nil, []string{"sinks.a.type: missing"}},
		{"sink that is not a mapping", "sinks:\n  a: log\n",
			nil, []string{"sinks.a: want a mapping"}},
		{"trace url without the placeholder", "telemetry:\n  trace_url: http://jaeger:16686/trace/\n",
			nil, []string{"telemetry.trace_url", "{trace_id}"}},
		{"trace url that is not http", "telemetry:\n  trace_url: javascript:alert({trace_id})\n",
			nil, []string{"telemetry.trace_url"}},
		{"ui that is not a boolean", "http:\n  ui: sometimes\n",
			nil, []string{"http.ui"}},
		{"bad sink name", "sinks:\n  a.b:\n    type: log\n",
			nil, []string{"sinks.a.b: a sink name is lower-case letters"}},
		{"negative number", "relay:\n  batch_size: -1\n",
			nil, []string{"relay.batch_size: must not be negative"}},
		{"backoff upside down", "sinks:\n  a:\n    type: log\n    backoff: {initial: 1m, max: 1s}\n",
			nil, []string{"sinks.a.backoff: want 0 < initial <= max"}},
		{"bad rate limit", "sinks:\n  a:\n    type: log\n    rate_limit: {rate: 0, per: 1s}\n",
			nil, []string{"sinks.a.rate_limit"}},
		{"bad override", minimalConfig, map[string]string{"OUTBOXD_RELAY_BATCH_SIZE": "many"},
			[]string{"relay.batch_size", `"many"`}},
		{"bad protocol", "telemetry:\n  protocol: carrier\n",
			nil, []string{"telemetry.protocol"}},
		{"typo in relay.delete_on_sent", "relay:\n  delete_on_send: true\n",
			nil, []string{"unknown key relay.delete_on_send", "did you mean relay.delete_on_sent?"}},
		{"typo in relay.durable_writes", "relay:\n  durable_write: true\n",
			nil, []string{"unknown key relay.durable_write", "did you mean relay.durable_writes?"}},
		{"typo in relay.shutdown_timeout", "relay:\n  shutdown_timout: 5s\n",
			nil, []string{"unknown key relay.shutdown_timout", "did you mean relay.shutdown_timeout?"}},
		{"typo in telemetry.link_producer_span", "telemetry:\n  link_producer_spans: true\n",
			nil, []string{"unknown key telemetry.link_producer_spans", "did you mean telemetry.link_producer_span?"}},
		{"word for a boolean", "relay:\n  delete_on_sent: maybe\n",
			nil, []string{"relay.delete_on_sent", `want true or false, got "maybe"`}},
		{"number for a boolean", "relay:\n  durable_writes: 2\n",
			nil, []string{"relay.durable_writes"}},
		{"list for a boolean", "telemetry:\n  link_producer_span: [yes]\n",
			nil, []string{"telemetry.link_producer_span"}},
		{"bad boolean override", minimalConfig, map[string]string{"OUTBOXD_RELAY_DELETE_ON_SENT": "sometimes"},
			[]string{"relay.delete_on_sent", `"sometimes"`}},
		{"shutdown_timeout without unit", "relay:\n  shutdown_timeout: 30\n",
			nil, []string{"relay.shutdown_timeout", "with a unit"}},
		{"negative shutdown_timeout", "relay:\n  shutdown_timeout: -1s\n",
			nil, []string{"relay.shutdown_timeout: must not be negative"}},
		{"not YAML", "relay: [unclosed\n",
			nil, []string{"not valid YAML"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), "test.yaml", EnvMap(tc.env))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("want a *Error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte("relay:\n  leese: 1s\nhttp:\n  lisen: x\n"), "f.yaml", EnvMap(nil))
	for _, w := range []string{"relay.leese", "http.lisen"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not list %s", err, w)
		}
	}
}

func TestParseConfigExpansionAndOverrides(t *testing.T) {
	t.Parallel()
	yaml := `
database:
  url: ${DB_URL}
  schema: ${SCHEMA:-fallback}
relay:
  batch_size: ${BATCH:-250}
  lease: 45s
http:
  token: "literal $${NOT_EXPANDED} and ${TOKEN}"
sinks:
  ops-mail:
    type: log
    max_attempts: 3
    backoff: {initial: 2s, max: 1m}
    rate_limit: {rate: 5, per: 1s}
`
	env := EnvMap(map[string]string{
		"DB_URL":                              "postgres://app@db/app",
		"TOKEN":                               "abc",
		"OUTBOXD_RELAY_LEASE":                 "1m",
		"OUTBOXD_RELAY_CONCURRENCY":           "8",
		"OUTBOXD_SINKS_OPS_MAIL_MAX_ATTEMPTS": "7",
	})
	cfg, err := Parse([]byte(yaml), "t.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"database.url", cfg.Database.URL, "postgres://app@db/app"},
		{"database.schema default", cfg.Database.Schema, "fallback"},
		{"relay.batch_size from default", cfg.Relay.BatchSize, 250},
		{"relay.lease overridden", cfg.Relay.Lease, time.Minute},
		{"relay.concurrency overridden", cfg.Relay.Concurrency, 8},
		{"relay.poll_interval core default", cfg.Relay.PollInterval, time.Second},
		{"http.token", string(cfg.HTTP.Token), "literal ${NOT_EXPANDED} and abc"},
		{"http.listen default", cfg.HTTP.Listen, DefaultListen},
		{"sink max_attempts overridden", cfg.Sinks["ops-mail"].MaxAttempts, 7},
		{"sink backoff", cfg.Sinks["ops-mail"].Backoff, BackoffSpec{Initial: 2 * time.Second, Max: time.Minute}},
		{"sink rate limit burst default", *cfg.Sinks["ops-mail"].RateLimit, RateLimitSpec{Rate: 5, Per: time.Second, Burst: 1}},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestParseConfigRelayOptions: the relay's switches and shutdown timeout
// are read from the file and from OUTBOX_ overrides, and default to the
// core's behaviour.
func TestParseConfigRelayOptions(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(nil, "", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Relay.DeleteOnSent || cfg.Relay.DurableWrites || cfg.Telemetry.LinkProducerSpan || cfg.Relay.ShutdownTimeout != relay.DefaultShutdownTimeout {
		t.Errorf("defaults: relay %+v, telemetry %+v", cfg.Relay, cfg.Telemetry)
	}
	yaml := "relay:\n  delete_on_sent: true\n  shutdown_timeout: 5s\ntelemetry:\n  link_producer_span: true\n"
	cfg, err = Parse([]byte(yaml), "t.yaml", EnvMap(map[string]string{"OUTBOXD_RELAY_DURABLE_WRITES": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Relay.DeleteOnSent || !cfg.Relay.DurableWrites || !cfg.Telemetry.LinkProducerSpan || cfg.Relay.ShutdownTimeout != 5*time.Second {
		t.Errorf("set: relay %+v, telemetry %+v", cfg.Relay, cfg.Telemetry)
	}
}

// TestParseConfigAllowedHosts: http.allowed_hosts is a YAML list, or a
// comma-separated OUTBOXD_HTTP_ALLOWED_HOSTS.
func TestParseConfigAllowedHosts(t *testing.T) {
	t.Parallel()
	want := []string{"outbox.example.com", "outboxd.internal"}
	cfg, err := Parse([]byte("http:\n  allowed_hosts: [outbox.example.com, outboxd.internal]\n"), "t.yaml", EnvMap(nil))
	if err != nil || !slices.Equal(cfg.HTTP.AllowedHosts, want) {
		t.Errorf("from the file: %v %v", cfg, err)
	}
	cfg, err = Parse(nil, "", EnvMap(map[string]string{"OUTBOXD_HTTP_ALLOWED_HOSTS": "outbox.example.com,outboxd.internal"}))
	if err != nil || !slices.Equal(cfg.HTTP.AllowedHosts, want) {
		t.Errorf("from the environment: %v %v", cfg, err)
	}
}

// TestParseConfigConsoleKeys: the console is on unless http.ui is false
// (in the file or OUTBOXD_HTTP_UI), and telemetry.trace_url is kept.
func TestParseConfigConsoleKeys(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(nil, "", EnvMap(nil))
	if err != nil || !cfg.HTTP.UI || cfg.Telemetry.TraceURL != "" {
		t.Errorf("defaults: %+v %v", cfg, err)
	}
	cfg, err = Parse([]byte("http:\n  ui: false\ntelemetry:\n  trace_url: http://jaeger:16686/trace/{trace_id}\n"), "t.yaml", EnvMap(nil))
	if err != nil || cfg.HTTP.UI || cfg.Telemetry.TraceURL != "http://jaeger:16686/trace/{trace_id}" {
		t.Errorf("from the file: %+v %v", cfg, err)
	}
	cfg, err = Parse(nil, "", EnvMap(map[string]string{"OUTBOXD_HTTP_UI": "false"}))
	if err != nil || cfg.HTTP.UI {
		t.Errorf("from the environment: %+v %v", cfg, err)
	}
}

func TestParseConfigEmptyIsDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(nil, "", EnvMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.Schema != "outbox" || cfg.Relay.BatchSize == 0 || len(cfg.Sinks) != 0 {
		t.Errorf("unexpected defaults: %+v", cfg)
	}
}

func TestConfigShowRedactsSecrets(t *testing.T) {
	t.Parallel()
	yaml := `
database:
  url: postgres://app:db-pass-123@db:5432/app
http:
  token: ${TOKEN}
sinks:
  a:
    type: ` + anyOptionsType + `
    options:
      nested: {password: smtp-pass-456, api_key: key-789}
`
	cfg, err := Parse([]byte(yaml), "t.yaml", EnvMap(map[string]string{"TOKEN": "http-token-000"}))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := cfg.WriteRedacted(&out); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"db-pass-123", "http-token-000", "smtp-pass-456", "key-789"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("config show leaks %q:\n%s", secret, out.String())
		}
	}
	for _, kept := range []string{"postgres://app:", "@db:5432/app", secret.Redacted} {
		if !strings.Contains(out.String(), kept) {
			t.Errorf("config show lost %q:\n%s", kept, out.String())
		}
	}
	scrub := secret.NewScrubber(cfg.secrets...)
	if got := scrub.String("dial db-pass-123 with http-token-000"); got != "dial [REDACTED] with [REDACTED]" {
		t.Errorf("scrubbed to %q", got)
	}
}

func TestRedactKeywordConnectionString(t *testing.T) {
	t.Parallel()
	got := secret.RedactURL("host=db user=app password=s3cr3t-pw dbname=app")
	if strings.Contains(got, "s3cr3t-pw") || !strings.Contains(got, "password="+secret.Redacted) {
		t.Errorf("redactURL = %q", got)
	}
}

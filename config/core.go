package config

import (
	"errors"
	"maps"
	"slices"

	"github.com/outboxd/outboxd/confschema"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
)

// The keys whose values go to core are copied by the assignments below,
// field by field, so that renaming a core field is a compile error here.
// Core fills their defaults and checks their ranges; the configuration
// takes the effective values back, so that `config show` prints what the
// relay runs with.

// RelayConfig is the relay.Config the configuration describes: the keys
// core owns and the built sinks. The caller adds the outbox, the logger and
// the telemetry providers.
func (c *Config) RelayConfig() relay.Config {
	rc := c.coreConfig()
	rc.Sinks = c.sinks
	if c.routes != nil {
		rc.Fallbacks = c.routes.Fallbacks()
	}
	return rc
}

// coreConfig is the relay.Config of the keys core owns, without sinks.
func (c *Config) coreConfig() relay.Config {
	return relay.Config{
		BatchSize:          c.Relay.BatchSize,
		Lease:              c.Relay.Lease,
		PollInterval:       c.Relay.PollInterval,
		Concurrency:        c.Relay.Concurrency,
		MaxClaimBytes:      c.Relay.MaxClaimBytes,
		ShutdownTimeout:    c.Relay.ShutdownTimeout,
		DeleteOnSent:       c.Relay.DeleteOnSent,
		DurableRelayWrites: c.Relay.DurableWrites,
		SentRetention:      c.Retention.Sent,
		ThreadRetention:    c.Retention.Threads,
		LinkProducerSpan:   c.Telemetry.LinkProducerSpan,
	}
}

// takeCore sets the keys core owns from eff, core's effective values.
func (c *Config) takeCore(eff relay.Config) {
	c.Relay.BatchSize = eff.BatchSize
	c.Relay.Lease = eff.Lease
	c.Relay.PollInterval = eff.PollInterval
	c.Relay.Concurrency = eff.Concurrency
	c.Relay.MaxClaimBytes = eff.MaxClaimBytes
	c.Relay.ShutdownTimeout = eff.ShutdownTimeout
	c.Relay.DeleteOnSent = eff.DeleteOnSent
	c.Relay.DurableWrites = eff.DurableRelayWrites
	c.Retention.Sent = eff.SentRetention
	c.Retention.Threads = eff.ThreadRetention
	c.Telemetry.LinkProducerSpan = eff.LinkProducerSpan
}

// coreSink is the relay.SinkConfig of the sink name, built as built.
func (s SinkSpec) coreSink(name string, built sink.Sink) relay.SinkConfig {
	sc := relay.SinkConfig{
		Name:         name,
		Type:         s.Type,
		Sink:         built,
		MaxAttempts:  s.MaxAttempts,
		MaxDeferrals: s.MaxDeferrals,
		Backoff:      relay.Backoff{Initial: s.Backoff.Initial, Max: s.Backoff.Max},
		MaxInFlight:  s.MaxInFlight,
		CircuitBreaker: relay.CircuitBreaker{
			Disabled:            s.CircuitBreaker.Enabled != nil && !*s.CircuitBreaker.Enabled,
			ConsecutiveFailures: s.CircuitBreaker.ConsecutiveFailures,
			FailureRatio:        s.CircuitBreaker.FailureRatio,
			MinDeliveries:       s.CircuitBreaker.MinDeliveries,
			Window:              s.CircuitBreaker.Window,
			ProbeInterval:       s.CircuitBreaker.ProbeInterval,
			MaxProbeInterval:    s.CircuitBreaker.MaxProbeInterval,
		},
	}
	if rl := s.RateLimit; rl != nil {
		sc.RateLimit = &sink.RateLimit{Rate: rl.Rate, Per: rl.Per, Burst: rl.Burst, PerKey: rl.PerKey}
	}
	// What the relay needs from a sink delivering to destinations (its
	// destinations' own rate limits, auto_disable_after) is a hook of the
	// engine, set by the destinations feature, not part of the sink.
	destinations.HookRelay(&sc)
	if s.Digest != nil {
		// A key that does not parse leaves the sink undigested; checkDigests
		// reports it.
		sc.Digest, _ = s.Digest.Policy()
	}
	return sc
}

// takeCore sets the keys of a sink's policy from eff, core's effective
// policy.
func (s *SinkSpec) takeCore(eff relay.SinkConfig) {
	s.MaxAttempts = eff.MaxAttempts
	s.MaxDeferrals = eff.MaxDeferrals
	s.Backoff = BackoffSpec{Initial: eff.Backoff.Initial, Max: eff.Backoff.Max}
	s.MaxInFlight = eff.MaxInFlight
	enabled, cb := !eff.CircuitBreaker.Disabled, eff.CircuitBreaker
	s.CircuitBreaker = CircuitBreakerSpec{Enabled: &enabled, ConsecutiveFailures: cb.ConsecutiveFailures,
		FailureRatio: cb.FailureRatio, MinDeliveries: cb.MinDeliveries, Window: cb.Window,
		ProbeInterval: cb.ProbeInterval, MaxProbeInterval: cb.MaxProbeInterval}
	s.RateLimit = nil
	if rl := eff.RateLimit; rl != nil {
		s.RateLimit = &RateLimitSpec{Rate: rl.Rate, Per: rl.Per, Burst: rl.Burst, PerKey: rl.PerKey}
	}
	if s.Digest != nil && eff.Digest != nil {
		s.Digest.MaxMessages = eff.Digest.MaxMessages
	}
}

// relayKeys name the key of each relay.Config field a *relay.FieldError may
// name; sinkKeys those of relay.SinkConfig, below sinks.<name>.
var (
	relayKeys = map[string]string{
		"BatchSize":       "relay.batch_size",
		"Lease":           "relay.lease",
		"PollInterval":    "relay.poll_interval",
		"Concurrency":     "relay.concurrency",
		"MaxClaimBytes":   "relay.max_claim_bytes",
		"ShutdownTimeout": "relay.shutdown_timeout",
		"SentRetention":   "retention.sent",
		"ThreadRetention": "retention.threads",
	}
	sinkKeys = map[string]string{
		"MaxAttempts":        "max_attempts",
		"MaxDeferrals":       "max_deferrals",
		"Backoff":            "backoff",
		"Backoff.Initial":    "backoff.initial",
		"Backoff.Max":        "backoff.max",
		"RateLimit":          "rate_limit",
		"RateLimit.Rate":     "rate_limit.rate",
		"RateLimit.Per":      "rate_limit.per",
		"RateLimit.Burst":    "rate_limit.burst",
		"RateLimit.PerKey":   "rate_limit.per_key",
		"MaxInFlight":        "max_in_flight",
		"Digest":             "digest",
		"Digest.Window":      "digest.window",
		"Digest.MaxMessages": "digest.max_messages",

		"CircuitBreaker.ConsecutiveFailures": "circuit_breaker.consecutive_failures",
		"CircuitBreaker.FailureRatio":        "circuit_breaker.failure_ratio",
		"CircuitBreaker.MinDeliveries":       "circuit_breaker.min_deliveries",
		"CircuitBreaker.Window":              "circuit_breaker.window",
		"CircuitBreaker.ProbeInterval":       "circuit_breaker.probe_interval",
	}
)

// applyCore hands the keys core owns to relay.Config.Effective, takes the
// effective values back, and returns core's complaints as problems naming
// their keys. built holds the sinks that could be built; the policies of
// the others are checked all the same.
func (c *Config) applyCore(built map[string]sink.Sink) []confschema.Problem {
	rc := c.coreConfig()
	names := slices.Sorted(maps.Keys(c.Sinks))
	for _, name := range names {
		rc.Sinks = append(rc.Sinks, c.Sinks[name].coreSink(name, built[name]))
	}
	eff, err := rc.Effective()
	c.takeCore(eff)
	for i, name := range names {
		spec := c.Sinks[name]
		spec.takeCore(eff.Sinks[i])
		c.Sinks[name] = spec
	}
	c.sinks = eff.Sinks
	return coreProblems(err)
}

// coreProblems turns the *core.FieldErrors joined in err into problems
// naming the keys of the fields.
func coreProblems(err error) []confschema.Problem {
	if err == nil {
		return nil
	}
	var problems []confschema.Problem
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *relay.FieldError
		if !errors.As(e, &fe) {
			problems = append(problems, confschema.Problem{Message: e.Error()})
			continue
		}
		p := confschema.Problem{Key: relayKeys[fe.Field], Message: fe.Err.Error()}
		if fe.Sink != "" {
			p = confschema.Problem{Key: sinkKeys[fe.Field], Message: p.Message}.Under("sinks." + fe.Sink)
		}
		problems = append(problems, p)
	}
	return problems
}

package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// Defaults for a sink's delivery policy. Each can be overridden per sink.
const (
	// DefaultMaxAttempts is how many attempts a message gets before it is
	// dead-lettered, unless the message or its sink says otherwise.
	DefaultMaxAttempts = 10
	// DefaultMaxDeferrals is how many times a Retry-After answer may put a
	// message off before it is dead-lettered. Deferrals spend no attempt
	// and each waits at least the growing backoff, so 50 lets a receiver
	// rate-limit a message for about seven hours at the default backoff,
	// longer than any real rate limit, while one that answers 429 forever
	// cannot hold rows forever.
	DefaultMaxDeferrals = 50
	// DefaultBackoffInitial is the first retry delay; later ones double.
	DefaultBackoffInitial = time.Second
	// DefaultBackoffMax caps the retry delay.
	DefaultBackoffMax = 10 * time.Minute
	// DefaultRateBurst is how many deliveries may start back to back after an
	// idle spell when a rate limit sets no burst.
	DefaultRateBurst = 1
)

// rateLimitProblems returns one *FieldError (of sink) per field of r out of
// range.
func rateLimitProblems(r sink.RateLimit, sinkName string) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Sink: sinkName, Field: "RateLimit" + field, Err: fmt.Errorf(format, args...)})
	}
	if r.Rate <= 0 {
		add(".Rate", "must be positive, got %d", r.Rate)
	}
	if r.Per <= 0 {
		add(".Per", "must be positive, got %s", r.Per)
	}
	if r.Burst < 0 {
		add(".Burst", "must not be negative, got %d", r.Burst)
	}
	if len(errs) == 0 && r.Interval() <= 0 {
		add("", "%d per %s is finer than a nanosecond", r.Rate, r.Per)
	}
	return errs
}

// Backoff shapes the delay before a failed delivery is retried: exponential
// from Initial, capped at Max, with jitter so that a burst of failures does
// not come back as a burst of retries.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
}

// SinkConfig is one configured sink instance: the name rows carry in their
// sink column, the Sink that delivers them, and its delivery policy. Zero
// fields take the defaults above.
type SinkConfig struct {
	Name string // the value of the rows' sink column
	Type string // the sink type (slack, webhook, ...), for telemetry
	Sink sink.Sink

	MaxAttempts int
	// MaxDeferrals bounds how many times one message may be put off
	// (without spending an attempt) before it is dead-lettered: by a
	// Retry-After, or by an outage sparing its last attempt while the
	// receiver's breaker is closed (breaker_spare.go).
	MaxDeferrals int
	Backoff      Backoff
	// RateLimit, when set, holds for the whole cluster. When nil, a sink that
	// implements RateLimitDefaulter gets its default; others are unlimited.
	RateLimit *sink.RateLimit
	// MaxInFlight bounds this sink's concurrent deliveries on one relay;
	// 0 means the relay's Concurrency. A BatchSink's rows count one each,
	// and 0 means the relay's BatchSize for it, so a claim's rows go out in
	// one batch.
	MaxInFlight int
	// CircuitBreaker stops the cluster from claiming the rows of a
	// receiver that is down, and probes it (see CircuitBreaker); on by
	// default.
	CircuitBreaker CircuitBreaker
	// TenantShare, when set, bounds the slots the rate keys of one tenant
	// may hold together (see TenantShare); only a sink limited per key
	// has keys to group.
	TenantShare *TenantShare
	// KeyRateLimit, when set, gives some rate keys of a sink limited per
	// key (RateLimit.PerKey, which it requires) a rate limit of their
	// own, in place of RateLimit: a tenant's destination with its
	// rate_limit. The relay spaces key's deliveries, cluster-wide, by the
	// limit it returns, and by RateLimit for a key it returns none for
	// (ok false) or one out of range (Rate or Per not positive, Burst
	// negative, an interval finer than a microsecond); a Burst of 0 is 1
	// and PerKey is ignored. It is asked once per key per reservation,
	// before the delivery, so it should answer from memory; ctx bounds a
	// read it makes for a key it does not know yet. Like TenantShare it
	// is the engine's hook, set by whoever builds the sink's
	// configuration (destinations.HookRelay), not part of the sink
	// contract.
	KeyRateLimit func(ctx context.Context, key string) (limit sink.RateLimit, ok bool)
	// AutoDisableAfter, when positive, is how long a rate key's circuit
	// breaker may stay open before the relay disables the key's
	// destination (breaker_autodisable.go): each rate key of the sink is
	// then a destination's id (the destinations table of migration 016),
	// and a disabled destination's rows wait without spending attempts
	// until it is enabled again. 0 never disables. It is the engine's hook
	// for sinks that deliver to destinations, set by
	// destinations.HookRelay.
	AutoDisableAfter time.Duration
	// Digest, when set, groups the sink's rows into digests, one delivery
	// each (see sink.DigestPolicy and digest.go); the sink must implement
	// sink.DigestSink.
	Digest *sink.DigestPolicy
	// RouteDigests are the digest policies of the routes whose target is
	// this sink, by route name: a route's rows are digested by its
	// target's policy, only with rows of that route, instead of by Digest.
	RouteDigests map[string]*sink.DigestPolicy
}

// effective completes c's policy with the defaults and returns an error per
// field out of range (see Config.Effective). maxInFlight is the most
// deliveries the relay lets one sink have in flight.
func (c SinkConfig) effective(maxInFlight int) (SinkConfig, []error) {
	if c.Name == "" {
		return c, []error{errors.New("outbox: sink config without a name")}
	}
	var errs []error
	invalid := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Sink: c.Name, Field: field, Err: fmt.Errorf(format, args...)})
	}
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	if c.MaxAttempts < 0 {
		invalid("MaxAttempts", "must not be negative, got %d", c.MaxAttempts)
	}
	setDefault(&c.MaxDeferrals, DefaultMaxDeferrals)
	if c.MaxDeferrals < 0 {
		invalid("MaxDeferrals", "must not be negative, got %d", c.MaxDeferrals)
	}
	setDefault(&c.Backoff.Initial, DefaultBackoffInitial)
	setDefault(&c.Backoff.Max, DefaultBackoffMax)
	if c.Backoff.Initial < 0 || c.Backoff.Max < c.Backoff.Initial {
		invalid("Backoff", "want 0 < initial <= max, got %s and %s", c.Backoff.Initial, c.Backoff.Max)
	}
	if c.RateLimit == nil {
		if d, ok := c.Sink.(sink.RateLimitDefaulter); ok {
			rl := d.DefaultRateLimit()
			c.RateLimit = &rl
		}
	}
	if c.RateLimit != nil {
		rl := *c.RateLimit
		setDefault(&rl.Burst, DefaultRateBurst)
		errs = append(errs, rateLimitProblems(rl, c.Name)...)
		// A policy checked without its sink (config.DatabaseOnly, or a
		// sink whose options failed) cannot be asked; New refuses a nil
		// sink anyway.
		if _, keyed := c.Sink.(sink.RateKeyer); rl.PerKey && !keyed && c.Sink != nil {
			invalid("RateLimit.PerKey", "needs a sink that names each delivery's rate key (a sink.RateKeyer); this one does not")
		}
		// Such a sink's rate keys each have their limit and breaker:
		// one limit for the whole sink would let one hold up the others.
		if c.KeyRateLimit != nil && !rl.PerKey {
			invalid("RateLimit.PerKey", "must be set: this sink limits each rate key on its own (KeyRateLimit)")
		}
		c.RateLimit = &rl
	}
	var cbErrs []error
	c.CircuitBreaker, cbErrs = c.CircuitBreaker.effective(c.Name)
	errs = append(errs, cbErrs...)
	errs = append(errs, c.digestProblems()...)
	if t := c.TenantShare; t != nil && (t.Of == nil || !(t.Share > 0 && t.Share <= 1)) {
		invalid("TenantShare", "must name each key's tenant and a share above 0 and at most 1, got %g", t.Share)
	}
	if c.MaxInFlight < 0 {
		invalid("MaxInFlight", "must not be negative, got %d", c.MaxInFlight)
	}
	if c.MaxInFlight <= 0 || c.MaxInFlight > maxInFlight {
		c.MaxInFlight = maxInFlight
	}
	return c, errs
}

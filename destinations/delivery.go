package destinations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// The delivery: a sink that delivers each row to the destination the row
// names, as the webhook sink delivers to its one URL, through the client
// of the one network policy (destinations.network) and with Standard
// Webhooks signing, each request signed with every secret of the
// destination still signing. The destination is the row's rate key, so
// rate limits, ordering and circuit breakers hold per destination
// (rate_limit.per_key): one slow or dead endpoint never holds up
// another's rows. plugins.yaml names it as the sink type destinations,
// defined by package sinks/destinations, which lends it the webhook
// sink's request and payload shape ([Webhook]): this package sits below
// the sinks and imports none.

// SinkDescription says in one line what a sink of type destinations
// delivers to.
const SinkDescription = "POSTs each row to the tenant's destination it names, signed the Standard Webhooks way with the destination's secrets"

// Defaults of a destinations sink's options.
const (
	// DefaultTimeout bounds one request unless the timeout option sets
	// another: the webhook sink's, since a destination is a webhook.
	DefaultTimeout = 10 * time.Second
	// DefaultRate is each destination's rate limit, deliveries per second,
	// unless rate_limit sets another.
	DefaultRate = 10
	// DefaultAutoDisableAfter is how long a destination's circuit breaker
	// may stay open before the relay disables the destination, unless
	// auto_disable_after sets another: three days, long enough for a
	// customer's weekend outage, short enough not to probe a dead
	// endpoint for ever.
	DefaultAutoDisableAfter = 72 * time.Hour
	// disabledRecheck is how soon a row that reaches the sink while its
	// destination is disabled (claimed in the moment of the disable)
	// comes back: the directory parks it before then (ParkSoon).
	disabledRecheck = 2 * ParkDelay
)

// SinkOptions are a destinations sink's options, what all destinations
// share; each is declared here once (see package confschema).
//
// AllowPrivate, Schemes and Ports are deprecated aliases of the one
// network policy, destinations.network (NetworkConfig): without that
// block, the strictest of every destinations sink's applies to every
// destination, whichever sink delivers it (a test event goes through any
// of them).
type SinkOptions struct {
	Timeout      time.Duration `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	AllowPrivate bool          `mapstructure:"allow_private" doc:"deprecated alias of destinations.network.allow_private (also opening link-local addresses), used when that block is absent; several sinks' combine into the strictest"`
	Schemes      []string      `mapstructure:"schemes" doc:"deprecated alias of destinations.network.schemes, used when that block is absent; several sinks' combine into the strictest"`
	Ports        []int         `mapstructure:"ports" defaultdoc:"any" doc:"deprecated alias of destinations.network.ports, used when that block is absent; several sinks' combine into the strictest"`
	// AutoDisableAfter is declared here and given to the relay by
	// HookRelay.
	AutoDisableAfter time.Duration `mapstructure:"auto_disable_after" doc:"how long a destination's circuit breaker may stay open before the relay disables the destination (its rows wait, none is dead-lettered) and publishes outboxd.destination.disabled; 0 never disables"`
}

// DefaultSinkOptions returns the options a destinations sink has before
// its options block applies.
func DefaultSinkOptions() SinkOptions {
	return SinkOptions{Timeout: DefaultTimeout, Schemes: slices.Clone(DefaultSchemes), AutoDisableAfter: DefaultAutoDisableAfter}
}

// Webhook is what a destinations sink borrows from the webhook sink,
// handed over by the sink type's definition (package sinks/destinations)
// because this package sits below the sinks.
type Webhook struct {
	// Post sends body to e through client under webhook-id id, signed,
	// and maps the answer to a delivery's outcome (nil, retryable,
	// sink.Permanent, sink.RetryAfter) without repeating the URL or a
	// secret: the webhook sink's Post.
	Post func(ctx context.Context, client *http.Client, e standardwebhooks.Endpoint, id string, body []byte) error
	// Shape is the payload routes render for a destination: the
	// webhook's, for targets that name a tenant.
	Shape sink.Shape
}

// Sink delivers rows to the destinations they name. It is safe for
// concurrent use.
type Sink struct {
	name             string
	timeout          time.Duration
	tracer           trace.TracerProvider
	webhook          Webhook
	alias            NetworkConfig // the network options given to the sink itself
	network          atomic.Pointer[networkClient]
	autoDisableAfter time.Duration
	resources        sink.Resources            // where the directory is published
	dir              atomic.Pointer[Directory] // the directory, once found
}

// What the sink offers the relay and the configuration.
var (
	_ sink.RateKeyer          = (*Sink)(nil)
	_ sink.RateLimitDefaulter = (*Sink)(nil)
	_ sink.Shaper             = (*Sink)(nil)
	_ NetworkUser             = (*Sink)(nil)
)

// networkClient is the network policy a sink delivers under and the
// clients that hold it: the policy's, and each authenticating
// destination's own.
type networkClient struct {
	policy  *Network
	clients *Clients
}

// NewSink builds the destinations sink called name from its options,
// posting through w; it finds the destinations in env's resources (see
// DirectoryResource) and traces its requests with env's tracer provider.
// It does no I/O.
func NewSink(name string, o SinkOptions, env sink.Env, w Webhook) (*Sink, error) {
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("option timeout: must be positive, got %s", o.Timeout)
	}
	if o.AutoDisableAfter < 0 {
		return nil, fmt.Errorf("option auto_disable_after: must not be negative (0 never disables), got %s", o.AutoDisableAfter)
	}
	if w.Post == nil {
		return nil, errors.New("destinations sink: no Webhook.Post to send requests with")
	}
	alias := NetworkConfig{Schemes: o.Schemes, Ports: o.Ports, AllowPrivate: o.AllowPrivate, AllowLinkLocal: o.AllowPrivate}
	policy, err := alias.Network()
	if err != nil {
		return nil, fmt.Errorf("option %w", err)
	}
	s := &Sink{name: name, timeout: o.Timeout, tracer: env.TracerProvider, webhook: w, alias: alias,
		autoDisableAfter: o.AutoDisableAfter, resources: env.Resources}
	s.UseNetwork(policy)
	return s, nil
}

// NetworkOptions are the network options the sink was given itself, and
// whether any differs from the default: the configuration combines them
// into the one policy when destinations.network is absent, and refuses
// them beside it.
func (s *Sink) NetworkOptions() (NetworkConfig, bool) {
	def := DefaultNetworkConfig()
	declared := s.alias.AllowPrivate || len(s.alias.Ports) > 0 || !slices.Equal(s.alias.Schemes, def.Schemes)
	return s.alias, declared
}

// UseNetwork makes the sink deliver under policy, the one every
// destination has; until the configuration calls it, the sink's own
// options are its policy.
func (s *Sink) UseNetwork(policy *Network) {
	s.network.Store(&networkClient{policy: policy, clients: policy.Clients(s.timeout, s.tracer)})
}

// Network is the policy the sink delivers under: the configuration hands
// it to the destinations' Store, which checks URLs against it at the door
// (Store.WithNetwork).
func (s *Sink) Network() *Network { return s.network.Load().policy }

// directory returns the destinations the sink delivers to, nil until the
// serving process has published them (DirectoryResource). Once found, the
// directory is kept: a delivery does not look it up again.
func (s *Sink) directory() *Directory {
	if d := s.dir.Load(); d != nil {
		return d
	}
	d, ok := sink.LookupResource[*Directory](s.resources, DirectoryResource)
	if !ok {
		return nil
	}
	s.dir.Store(d)
	return d
}

// errNoDirectory is a delivery's outcome before the directory is
// published.
var errNoDirectory = errors.New("the destinations are not loaded yet")

// RateKey names a row's destination: its destination id.
func (s *Sink) RateKey(d *sink.Delivery) (string, error) {
	id := d.Headers[Header]
	if id == "" {
		return "", sink.Permanent(s.wrap(fmt.Errorf("the row names no destination (header %s): publish it through a route target with a tenant, or enqueue it with enqueue_destination()", Header)))
	}
	return id, nil
}

// Deliver POSTs the payload to the row's destination, signed with each of
// its signing secrets.
func (s *Sink) Deliver(ctx context.Context, d *sink.Delivery) error {
	id, err := s.RateKey(d)
	if err != nil {
		return err
	}
	dir := s.directory()
	if dir == nil {
		return s.wrap(errNoDirectory)
	}
	live, ok, err := findFor(ctx, dir, id, d)
	if err == nil && ok && !live.Enabled {
		// The row may have been made due by an enable this process has not
		// read yet: turned away, it would count against the destination's
		// breaker, and five such rows would open it and disable it again.
		live, ok, err = dir.Reread(ctx, id)
	}
	if err != nil {
		return s.wrap(err)
	}
	if !ok {
		return sink.Permanent(s.wrap(fmt.Errorf("destination %s does not exist (deleted)", id)))
	}
	if !live.Enabled {
		dir.ParkSoon(id)
		return sink.RetryAfter(disabledRecheck, s.wrap(fmt.Errorf("destination %s is disabled", id)))
	}
	network := s.network.Load()
	if err := network.policy.CheckURL(live.URL); err != nil {
		return sink.Permanent(s.wrap(fmt.Errorf("destination %s: %w", id, err)))
	}
	e, err := live.Endpoint(time.Now())
	if err != nil {
		return s.wrap(err)
	}
	// The destination's client authenticates its requests (its headers,
	// OAuth2 token, client certificate).
	client, err := network.clients.For(live)
	if err != nil {
		return s.wrap(err)
	}
	// The row's headers (its destination, trace context) are outboxd's,
	// not the receiver's: only the Standard Webhooks ones are sent.
	if err := s.webhook.Post(ctx, client, e, d.DeliveryID(), d.Payload); err != nil {
		return s.wrap(fmt.Errorf("destination %s: %w", id, err))
	}
	return nil
}

// findFor returns the row's destination as its producer saw it or newer:
// at the revision the row carries, or, for a row made before migration
// 025, as of its creation.
func findFor(ctx context.Context, dir *Directory, id string, d *sink.Delivery) (*Live, bool, error) {
	if rev, err := strconv.ParseInt(d.Headers[RevisionHeader], 10, 64); err == nil {
		return dir.FindAtRevision(ctx, id, rev)
	}
	return dir.FindAsOf(ctx, id, d.CreatedAt)
}

// wrap names the sink in err, keeping its class (Permanent, RetryAfter).
func (s *Sink) wrap(err error) error { return fmt.Errorf("destinations %q: %w", s.name, err) }

// TemplateShape is the Webhook's Shape: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return s.webhook.Shape }

// DefaultRateLimit spaces each destination's deliveries at DefaultRate
// per second, per destination (rate_limit.per_key).
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: time.Second, Burst: DefaultRate, PerKey: true}
}

// KeyRateLimit is the limit of destination key when it has a rate_limit
// of its own: that many deliveries per second, up to a second's worth
// back to back after an idle spell (as DefaultRateLimit allows). A
// destination without one (or unknown, or unreadable) takes the sink's
// limit. It reads the directory, in memory, which reads the destinations
// again only for a destination it does not know yet (created a moment
// ago), as Deliver would. HookRelay hands it to the relay.
func (s *Sink) KeyRateLimit(ctx context.Context, key string) (sink.RateLimit, bool) {
	dir := s.directory()
	if dir == nil {
		return sink.RateLimit{}, false
	}
	live, ok, err := dir.Find(ctx, key)
	if err != nil || !ok || live.RateLimit == nil {
		return sink.RateLimit{}, false
	}
	perSecond := *live.RateLimit
	return sink.RateLimit{Rate: 1, Per: time.Duration(float64(time.Second) / perSecond), Burst: max(1, int(perSecond))}, true
}

// AutoDisableAfter is the auto_disable_after option: how long a
// destination's breaker may stay open before the relay disables it.
// HookRelay hands it to the relay.
func (s *Sink) AutoDisableAfter() time.Duration { return s.autoDisableAfter }

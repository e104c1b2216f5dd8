// Package destinations is the sink of type destinations: it delivers each
// row to the destination the row names (package destinations: tenants'
// endpoints stored as data), as the webhook sink delivers to its one URL,
// through the same SSRF-safe client and with the same Standard Webhooks
// signing, each request signed with every secret of the destination still
// signing. The destination is the row's rate key, so rate limits,
// ordering and circuit breakers hold per destination (rate_limit.per_key):
// one slow or dead endpoint never holds up another's rows.
package destinations

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	dest "github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/sinks"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// Type is the destinations sink type, "destinations" in plugins.yaml, with
// its options ([Options]) and payload shape ([Shape]); its sinks look up
// the directory of destinations (DirectoryResource). Package sinks/builtin
// lists it.
var Type = registry.Define("destinations", Description, DefaultOptions(), newSink).
	WithShape(Shape()).WithResources(DirectoryResource)

// Description says in one line what a destinations sink delivers to.
const Description = "POSTs each row to the tenant's destination it names, signed the Standard Webhooks way with the destination's secrets"

// DirectoryResource is the name under which the serving process publishes
// the tenants' destinations, a *destinations.Directory, to the sinks of
// this type (sink.Env.Resources). It publishes it once the database is
// up; until then a delivery fails and is retried.
const DirectoryResource = "destinations.directory"

// Defaults of the options.
const (
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
	disabledRecheck = 2 * dest.ParkDelay
)

// DefaultSchemes are the URL schemes a destination may use unless the
// schemes option says otherwise.
var DefaultSchemes = []string{"https", "http"}

// Options are the destinations sink's options, what all destinations
// share; each is declared here once (see package confschema).
type Options struct {
	Timeout      time.Duration `mapstructure:"timeout" doc:"bounds one request; the relay's delivery deadline bounds it too"`
	AllowPrivate bool          `mapstructure:"allow_private" doc:"let destinations be loopback, private and link-local addresses, refused by default"`
	Schemes      []string      `mapstructure:"schemes" doc:"the URL schemes a destination may use"`
	Ports        []int         `mapstructure:"ports" defaultdoc:"any" doc:"the ports a destination may use; empty allows any"`
	// AutoDisableAfter is declared here and given to the relay through
	// sink.AutoDisabler.
	AutoDisableAfter time.Duration `mapstructure:"auto_disable_after" doc:"how long a destination's circuit breaker may stay open before the relay disables the destination (its rows wait, none is dead-lettered) and publishes outboxd.destination.disabled; 0 never disables"`
}

// DefaultOptions returns the options a destinations sink has before its
// options block applies.
func DefaultOptions() Options {
	return Options{Timeout: webhook.DefaultTimeout, Schemes: slices.Clone(DefaultSchemes), AutoDisableAfter: DefaultAutoDisableAfter}
}

// Sink delivers rows to the destinations they name. It is safe for
// concurrent use.
type Sink struct {
	name             string
	schemes          []string
	ports            []int
	autoDisableAfter time.Duration
	client           *http.Client
	resources        sink.Resources                 // where the directory is published
	dir              atomic.Pointer[dest.Directory] // the directory, once found
}

// The relay finds what the sink offers by these interfaces.
var (
	_ sink.RateKeyer      = (*Sink)(nil)
	_ sink.KeyRateLimiter = (*Sink)(nil)
	_ sink.AutoDisabler   = (*Sink)(nil)
)

// newSink builds the destinations sink called name from its decoded
// options; it finds the destinations in env's resources (see
// DirectoryResource) and traces its requests with env's tracer provider.
func newSink(name string, o Options, env sink.Env) (*Sink, error) {
	if o.Timeout <= 0 {
		return nil, fmt.Errorf("option timeout: must be positive, got %s", o.Timeout)
	}
	if len(o.Schemes) == 0 {
		return nil, errors.New("option schemes: list at least one (https)")
	}
	for i, s := range o.Schemes {
		if s != "http" && s != "https" {
			return nil, fmt.Errorf("option schemes[%d]: %q is not http or https", i, s)
		}
	}
	for i, p := range o.Ports {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("option ports[%d]: %d is not a port", i, p)
		}
	}
	if o.AutoDisableAfter < 0 {
		return nil, fmt.Errorf("option auto_disable_after: must not be negative (0 never disables), got %s", o.AutoDisableAfter)
	}
	return &Sink{name: name, schemes: o.Schemes, ports: o.Ports, autoDisableAfter: o.AutoDisableAfter, resources: env.Resources,
		client: sinks.NewHTTPClient(sinks.HTTPClientOptions{Timeout: o.Timeout, AllowPrivate: o.AllowPrivate, TracerProvider: env.TracerProvider})}, nil
}

// directory returns the destinations the sink delivers to, nil until the
// serving process has published them (DirectoryResource). Once found, the
// directory is kept: a delivery does not look it up again.
func (s *Sink) directory() *dest.Directory {
	if d := s.dir.Load(); d != nil {
		return d
	}
	d, ok := sink.LookupResource[*dest.Directory](s.resources, DirectoryResource)
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
	id := d.Headers[dest.Header]
	if id == "" {
		return "", sink.Permanent(s.wrap(fmt.Errorf("the row names no destination (header %s): publish it through a route target with a tenant, or enqueue it with enqueue_destination()", dest.Header)))
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
	if err := s.allowed(live.URL); err != nil {
		return sink.Permanent(s.wrap(fmt.Errorf("destination %s: %w", id, err)))
	}
	e, err := live.Endpoint(time.Now())
	if err != nil {
		return s.wrap(err)
	}
	// The row's headers (its destination, trace context) are outboxd's,
	// not the receiver's: only the Standard Webhooks ones are sent.
	if err := webhook.Post(ctx, s.client, e, d.DeliveryID(), d.Payload); err != nil {
		return s.wrap(fmt.Errorf("destination %s: %w", id, err))
	}
	return nil
}

// findFor returns the row's destination as its producer saw it or newer:
// at the revision the row carries, or, for a row made before migration
// 025, as of its creation.
func findFor(ctx context.Context, dir *dest.Directory, id string, d *sink.Delivery) (*dest.Live, bool, error) {
	if rev, err := strconv.ParseInt(d.Headers[dest.RevisionHeader], 10, 64); err == nil {
		return dir.FindAtRevision(ctx, id, rev)
	}
	return dir.FindAsOf(ctx, id, d.CreatedAt)
}

// allowed checks a destination's URL against the schemes and ports
// options; its errors never repeat the URL.
func (s *Sink) allowed(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("its url does not parse")
	}
	if !slices.Contains(s.schemes, u.Scheme) {
		return fmt.Errorf("its url's scheme %q is not one of the sink's schemes (%s)", u.Scheme, strings.Join(s.schemes, ", "))
	}
	if len(s.ports) == 0 {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, _ := strconv.Atoi(port)
	if !slices.Contains(s.ports, p) {
		return fmt.Errorf("its url's port %s is not one of the sink's ports", port)
	}
	return nil
}

// wrap names the sink in err, keeping its class (Permanent, RetryAfter).
func (s *Sink) wrap(err error) error { return fmt.Errorf("destinations %q: %w", s.name, err) }

// Shape is the webhook's (a body template, else the Standard Webhooks
// envelope), for targets that name a tenant. Type declares it, so that
// routes compile without building sinks (outboxd migrate).
func Shape() sink.Shape {
	shape := webhook.Shape()
	shape.Tenants = true
	return shape
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// DefaultRateLimit spaces each destination's deliveries at DefaultRate
// per second, per destination (rate_limit.per_key).
func (s *Sink) DefaultRateLimit() sink.RateLimit {
	return sink.RateLimit{Rate: DefaultRate, Per: time.Second, Burst: DefaultRate, PerKey: true}
}

// AutoDisableAfter is the auto_disable_after option: the sink implements
// sink.AutoDisabler.
func (s *Sink) AutoDisableAfter() time.Duration { return s.autoDisableAfter }

// KeyRateLimit is the limit of destination key when it has a rate_limit
// of its own: that many deliveries per second, up to a second's worth
// back to back after an idle spell (as DefaultRateLimit allows). A
// destination without one (or unknown, or unreadable) takes the sink's
// limit. It reads the directory, in memory, which reads the destinations
// again only for a destination it does not know yet (created a moment
// ago), as Deliver would.
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

// Package console is outboxd's operator dashboard: an overview of every
// sink that updates itself, message search and detail, dead letters with
// redrive and purge, sink pauses by hand, and tenants' destinations. Its
// pages are rendered on the server from templates embedded in the binary,
// with a little plain JavaScript for the live overview: no build step, no
// CDN, it works offline. It reads and acts through core's operator
// queries and the destinations store only.
//
// Beside it, below portal.Path, it serves the tenant portal: the
// destination pages of one tenant, opened with a link portal.Links signs,
// with a session of their own (portal.go).
//
// `outboxd serve` mounts it at / on the API's port. With tokens, the
// browser signs in once with a named token and holds a session cookie
// derived from it (never the token itself); behind a trusted
// authenticating proxy, the proxy names the user. Each page needs the
// role of the API's endpoint for the same data (a produce token reads
// nothing, and may not sign in); the pages show who is signed in and
// offer only the actions their role grants (the server refuses the
// others too); every form that changes anything carries a
// CSRF token, and requests from other sites are refused.
package console

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/apidb"
	"github.com/outboxd/outboxd/server/portal"
)

// DefaultRefresh is how often the overview is read from the database while
// someone watches it: once per interval for all viewers together.
const DefaultRefresh = 2 * time.Second

// Sink is what the console may show of a configured sink: never its
// options, which hold the secrets.
type Sink struct {
	Name string
	Type string
	// RateLimit describes its cluster-wide limit in words ("" for none).
	RateLimit string
}

// Options configure a Console.
type Options struct {
	Operator *operator.Operator
	// DB is the console's pool: the API's (package apidb), whose
	// statements time out after QueryTimeout.
	DB audit.DB
	// QueryTimeout is DB's statement timeout; 0 means
	// config.DefaultQueryTimeout. A page whose query ran out of it answers
	// 503 saying so.
	QueryTimeout time.Duration
	// Sinks are the sinks this relay is configured with; sinks that have
	// rows but are not among them are shown as not configured here.
	// Reconfigure replaces them, TestEventSink and EventTypes.
	Sinks []Sink
	// Access holds the tokens one signs in with (the API's) and the
	// trusted proxy; nil means none: everyone may do everything.
	Access *access.Authenticator
	// TraceURL links a message to its trace: {trace_id} is replaced.
	TraceURL string
	// Refresh is how often live viewers get a new overview; 0 means
	// DefaultRefresh.
	Refresh time.Duration
	Logger  *slog.Logger
	// Destinations manages tenants' destinations: the destination pages
	// and the tenant portal. nil: neither is served.
	Destinations *destinations.Store
	// Portal signs and checks the tenant portal's links; nil (no
	// destinations.EnvSecretsKey): the portal is not served.
	Portal *portal.Links
	// TestEventSink is the sink of type destinations that test events
	// are sent through; "": none can be sent.
	TestEventSink string
	// EventTypes is the catalog of event types tenants may subscribe to
	// (plugins.yaml's event_types and outboxd's operational events): the
	// subscription forms offer it and test events send its types.
	EventTypes destinations.Catalog
}

// Console serves the dashboard. Create it with New; call Close when the
// server shuts down, to end the live overview streams.
type Console struct {
	opt Options
	// shown is what the console shows of the running configuration.
	shown    atomic.Pointer[shown]
	auth     *auth
	pages    *pages
	overview *overviewFeed
	handler  http.Handler
}

// New returns the console described by opt.
func New(opt Options) (*Console, error) {
	if opt.Refresh <= 0 {
		opt.Refresh = DefaultRefresh
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.QueryTimeout <= 0 {
		opt.QueryTimeout = config.DefaultQueryTimeout
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{opt: opt, pages: pages}
	c.Reconfigure(opt.Sinks, opt.TestEventSink, opt.EventTypes)
	if opt.Access == nil {
		opt.Access = access.New(nil, nil)
	}
	if c.auth, err = newAuth(opt.Access); err != nil {
		return nil, err
	}
	c.overview = newOverviewFeed(c.readOverview, opt.Refresh, opt.Logger)
	c.handler = c.routes()
	return c, nil
}

// shown is the part of the configuration the console shows, replaced
// whole by Reconfigure.
type shown struct {
	sinks         map[string]Sink
	testEventSink string
	eventTypes    destinations.Catalog
}

// Reconfigure makes the console show sinks, send test events through
// testEventSink and offer eventTypes (see Options) from its next page on:
// serve calls it when a reload applies a new plugins.yaml.
func (c *Console) Reconfigure(sinks []Sink, testEventSink string, eventTypes destinations.Catalog) {
	s := &shown{sinks: make(map[string]Sink, len(sinks)), testEventSink: testEventSink, eventTypes: eventTypes}
	for _, sk := range sinks {
		s.sinks[sk.Name] = sk
	}
	c.shown.Store(s)
}

// ServeHTTP serves the console's pages below /.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Close ends the live overview streams, so that a graceful shutdown of the
// HTTP server does not wait for them.
func (c *Console) Close() { c.overview.close() }

// route is one route of the console and the role it needs: the role of
// the API's endpoint that serves the same data or takes the same action
// (GET /v1/stats, /v1/messages, /v1/dlq, /v1/audit and the destinations'
// GETs need read; pausing, redriving, purging and changing destinations
// operate), so the console shows and does for no one what the API would
// refuse them. server/api's TestConsolePagesNeedTheRolesOfTheAPIsEndpoints
// holds the two to each other.
type route struct {
	pattern string
	role    access.Role
	handler http.HandlerFunc
}

// signInRole is the least role a page needs: a token without it may not
// sign in, as it could read nothing.
const signInRole = access.RoleRead

// guarded are the console's routes behind the sign-in, each with its
// role.
func (c *Console) guarded() []route {
	routes := []route{
		{"GET /{$}", access.RoleRead, c.getOverview},
		{"GET /overview/events", access.RoleRead, c.getOverviewEvents},
		{"GET /messages", access.RoleRead, c.getMessages},
		{"GET /messages/{id}", access.RoleRead, c.getMessage},
		{"GET /dead-letters", access.RoleRead, c.getDeadLetters},
		{"POST /dead-letters/confirm", access.RoleOperate, c.postConfirm},
		{"POST /dead-letters/apply", access.RoleOperate, c.postApply},
		{"GET /sinks/{name}", access.RoleRead, c.getSink},
		{"POST /sinks/{name}/pause", access.RoleOperate, c.postPause},
		{"POST /sinks/{name}/resume", access.RoleOperate, c.postResume},
		{"POST /sinks/{name}/forget", access.RoleOperate, c.postForget},
		{"GET /audit", access.RoleRead, c.getAudit},
		{"GET /destinations", access.RoleRead, c.getDestinations},
		{"POST /destinations", access.RoleOperate, c.postCreateDestination},
		{"GET /tenants/{tenant}/destinations/{id}", access.RoleRead, c.operatorScope(c.showDestination)},
	}
	for action, h := range c.destinationActions() {
		routes = append(routes, route{"POST /tenants/{tenant}/destinations/{id}/" + action, access.RoleOperate, c.operatorScope(h)})
	}
	return routes
}

func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range c.guarded() {
		mux.HandleFunc(rt.pattern, c.allow(rt.role, rt.handler))
	}
	mux.HandleFunc("GET /signin", c.getSignIn)
	mux.HandleFunc("POST /signin", c.postSignIn)
	mux.HandleFunc("POST /signout", c.postSignOut)
	mux.Handle("GET /static/", staticFiles())
	mux.HandleFunc("/", c.notFound)
	guard := http.NewCrossOriginProtection()
	guard.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, "This request came from another site and was refused.")
	}))
	// The tenant portal has sessions of its own (portal.go): the
	// console's sign-in neither guards nor opens it.
	top := http.NewServeMux()
	top.Handle(portal.Path+"/", c.portalRoutes())
	top.Handle("/", c.auth.require(mux, c))
	return securityHeaders(guard.Handler(top))
}

// destinationActions are the actions on one destination, by the last
// segment of their path, for the console and the portal alike.
func (c *Console) destinationActions() map[string]destinationHandler {
	return map[string]destinationHandler{
		"edit":          c.editDestination,
		"disable":       c.disableDestination,
		"enable":        c.enableDestination,
		"rotate-secret": c.rotateSecret,
		"auth":          c.setDestinationAuth,
		"delete":        c.deleteDestination,
		"test":          c.sendTestEvent,
		"redrive":       c.redriveDestination,
		"recover":       c.recoverDestination,
	}
}

// context bounds a page's database work.
func (c *Console) context(r *http.Request) (context.Context, context.CancelFunc) {
	return apidb.Context(r.Context(), c.opt.QueryTimeout)
}

// sinkNames are the configured sinks' names, sorted.
func (c *Console) sinkNames() []string {
	sinks := c.shown.Load().sinks
	names := make([]string, 0, len(sinks))
	for name := range sinks {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// traceLink is the URL of a trace, or "" without TraceURL or trace id.
func (c *Console) traceLink(traceID string) string {
	if c.opt.TraceURL == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(c.opt.TraceURL, "{trace_id}", traceID)
}

// securityHeaders keep the pages from being framed, from loading anything
// but their own files and from leaking their URLs to other sites.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

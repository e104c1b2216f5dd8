// Package api is the HTTP API of `outboxd serve`: enqueue and publish
// (/v1/messages, /v1/events), the operator endpoints (stats, dead letters,
// message lookup, sink pauses), the probes, and the middleware that guards
// everything the server serves. The server room (package server) mounts
// it, the metrics and the operator console on one mux ([API.Register],
// [RegisterOpen], [API.Guard]).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/apidb"
	"github.com/outboxd/outboxd/server/internal/auditactor"
	"github.com/outboxd/outboxd/server/portal"
	"github.com/outboxd/outboxd/server/telemetry"
)

// HTTP API limits.
const (
	// MaxRequestBodyBytes bounds a request body: one message at the core's
	// payload limit plus room for the other fields.
	MaxRequestBodyBytes = outboxd.DefaultMaxPayloadBytes + 64<<10
	// ReadinessTimeout bounds the database checks behind /readyz.
	ReadinessTimeout = 2 * time.Second
	// MaxDeadLetterLimit caps GET /v1/dlq's limit parameter: each dead
	// letter carries the error of every attempt, so one page of them can be
	// large.
	MaxDeadLetterLimit = 500
)

// API serves the HTTP endpoints of `outboxd serve`.
type API struct {
	Config   *config.Config
	Outbox   *outboxd.Outbox    // enqueues and publishes
	Operator *operator.Operator // the operator endpoints
	Migrator *migrate.Migrator  // readiness: the schema is current
	// DB is the API's own pool (apidb.Open), whose statements time out
	// after Config.HTTP.QueryTimeout.
	DB      *pgxpool.Pool
	Log     *slog.Logger
	Tracing trace.TracerProvider
	Meters  metric.MeterProvider
	// Destinations manages tenants' destinations (destinations.go).
	Destinations *destinations.Store
	// Portal signs the tenant portal's links (POST
	// /v1/tenants/{tenant}/portal); nil without destinations.EnvSecretsKey.
	Portal *portal.Links
	// Reload, when set, reloads the configuration for POST /-/reload as
	// actor: a *config.Error says the file was refused and the running
	// configuration kept.
	Reload func(ctx context.Context, actor audit.Actor) error
}

// route is one endpoint: its method and path pattern, spelt the way
// http.ServeMux and the OpenAPI document (openapi.json) both spell them,
// the role it needs (its x-outboxd-role there; empty for the open
// endpoints) and its handler.
type route struct {
	method, path string
	role         access.Role
	handler      http.HandlerFunc
}

// apiRoutes are the endpoints below /v1, the destinations ones
// (destinations.go) with them. Handler registers exactly these,
// and TestOpenAPIDescribesEveryEndpoint checks that openapi.json describes
// and a live answer matches each.
func (s *API) apiRoutes() []route {
	return append([]route{
		{http.MethodPost, "/v1/messages", access.RoleProduce, s.postMessage},
		{http.MethodPost, "/v1/events", access.RoleProduce, s.postEvent},
		{http.MethodGet, "/v1/stats", access.RoleRead, s.getStats},
		{http.MethodGet, "/v1/dlq", access.RoleRead, s.getDeadLetters},
		{http.MethodPost, "/v1/dlq/redrive", access.RoleOperate, s.postRedrive},
		{http.MethodPost, "/v1/dlq/purge", access.RoleOperate, s.postPurge},
		{http.MethodGet, "/v1/messages", access.RoleRead, s.getMessages},
		{http.MethodGet, "/v1/messages/{id}", access.RoleRead, s.getMessage},
		{http.MethodPost, "/v1/sinks/{name}/pause", access.RoleOperate, s.postPause},
		{http.MethodPost, "/v1/sinks/{name}/resume", access.RoleOperate, s.postResume},
		{http.MethodDelete, "/v1/sinks/{name}/pause", access.RoleOperate, s.deletePause},
		{http.MethodGet, "/v1/audit", access.RoleRead, s.getAudit},
	}, s.destinationRoutes()...)
}

// openRoutes are the open endpoints: the probes, as probes expect, and
// the API's own description, which is public documentation (below /v1,
// the one path there without a token).
func (s *API) openRoutes() []route {
	return []route{
		{http.MethodGet, openAPIPath, "", serveOpenAPI},
		{http.MethodGet, "/healthz", "", func(w http.ResponseWriter, _ *http.Request) {
			writeBody(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{http.MethodGet, "/readyz", "", s.getReady},
	}
}

// MetricsPath is where the server serves the metrics (GET, open as
// scrapers expect), beside the API: openapi.json describes it with the
// API's endpoints.
const MetricsPath = "/metrics"

// RegisterOpen registers h on mux for GET path, open as probes and
// scrapers expect; another method answers 405, as at the API's
// endpoints.
func RegisterOpen(mux *http.ServeMux, path string, h http.Handler) {
	registerRoutes(mux, []route{{http.MethodGet, path, "", h.ServeHTTP}}, func(h http.Handler) http.Handler { return h })
}

// ReloadPath reloads the configuration, outside /v1 where Prometheus has
// its own.
const ReloadPath = "/-/reload"

// adminRoutes are the endpoints outside /v1 that need a role: the reload,
// when API.Reload is set.
func (s *API) adminRoutes() []route {
	if s.Reload == nil {
		return nil
	}
	return []route{{http.MethodPost, ReloadPath, access.RoleAdmin, s.postReload}}
}

// postReload reloads the configuration: 200 once the new one runs, 422
// with its problems when it was refused (the running one stays).
func (s *API) postReload(w http.ResponseWriter, r *http.Request) {
	id, _ := access.IdentityOf(r.Context())
	err := s.Reload(r.Context(), auditactor.Of(id))
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		s.internalError(w, r, "reload", err)
	default:
		writeBody(w, http.StatusOK, map[string]string{"status": "reloaded"})
	}
}

// Register registers every endpoint of the API on mux: /v1/* behind the
// tokens or the trusted proxy (when configured), each allowed to the
// roles that grant it (403 naming the role otherwise), JSON bodies only,
// body limits and tracing; POST /-/reload behind the same tokens, for
// admins; /healthz, /readyz and the OpenAPI document open. A method an
// endpoint does not have answers 405 with Allow, a path below /v1 the
// API does not have 404, both as JSON errors.
func (s *API) Register(mux *http.ServeMux) {
	v1 := http.NewServeMux()
	// requireJSON runs once a route matched, so that a method the path
	// does not have answers 405, not 415.
	registerRoutes(v1, s.apiRoutes(), requireJSON)
	v1.HandleFunc("/", notFound)

	mux.Handle("/v1/", otelhttp.NewHandler(authenticate(s.Config.HTTP.Authenticator(), limitBody(boundQueries(s.Config.HTTP.QueryTimeout, v1))), "outboxd.api",
		otelhttp.WithTracerProvider(s.Tracing),
		otelhttp.WithMeterProvider(s.Meters),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }),
	))
	registerRoutes(mux, s.openRoutes(), func(h http.Handler) http.Handler { return h })
	registerRoutes(mux, s.adminRoutes(), func(h http.Handler) http.Handler {
		return authenticate(s.Config.HTTP.Authenticator(), limitBody(h))
	})
}

// Guard wraps h, everything the server serves (the API, the metrics, the
// console), in the guards every request passes: it must name this server
// in its Host header, no browser on another site may change state (see
// hostGuard, refuseCrossOrigin and requireJSON), and a handler's panic
// answers 500 (recoverPanics).
func (s *API) Guard(h http.Handler) http.Handler {
	return recoverPanics(s.Log, hostGuard(s.Config.HTTP.Listen, s.Config.HTTP.AllowedHosts, refuseCrossOrigin(h)))
}

// registerRoutes registers each route with mux through wrap, and for each
// path an answer of 405, with the path's methods in Allow, to every other
// method.
func registerRoutes(mux *http.ServeMux, routes []route, wrap func(http.Handler) http.Handler) {
	methods := map[string][]string{}
	for _, rt := range routes {
		h := rt.handler
		if rt.role != "" {
			h = allow(rt.role, h)
		}
		mux.Handle(rt.method+" "+rt.path, wrap(h))
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	for path, allowed := range methods {
		mux.Handle(path, methodNotAllowed(allowed))
	}
}

// notFound answers 404 to a path below /v1 that the API does not have,
// in the shape of its other errors.
func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s; openapi.json (GET %s) lists the API's endpoints", r.Method, r.URL.Path, openAPIPath))
}

// methodNotAllowed answers 405 naming the allowed methods, in the Allow
// header and the error; GET allows HEAD too, as http.ServeMux serves it.
func methodNotAllowed(methods []string) http.Handler {
	allowed := slices.Clone(methods)
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	slices.Sort(allowed)
	allow := strings.Join(allowed, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, allow))
	})
}

func (s *API) postMessage(w http.ResponseWriter, r *http.Request) {
	req, status, err := decodeMessageRequest(r.Body, s.Config)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	var res outboxd.EnqueueResult
	if req.Destination != "" {
		res, err = s.Outbox.EnqueueDestination(r.Context(), s.DB, req.Destination, req.Message.Message())
	} else {
		res, err = s.Outbox.Enqueue(r.Context(), s.DB, req.Message.Message())
	}
	switch {
	case errors.Is(err, outboxd.ErrInvalidMessage):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		s.internalError(w, r, "enqueue", err)
		return
	}
	status = http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeBody(w, status, map[string]any{"id": res.ID, "created": res.Created})
}

// publishedMessage is one row of a POST /v1/events answer.
type publishedMessage struct {
	Sink    string `json:"sink"`
	ID      int64  `json:"id"`
	Created bool   `json:"created"`
	// For a target with a tenant (destinations.go): the tenant and how
	// many destination rows the event made, with a note when none.
	Tenant       string `json:"tenant,omitempty"`
	Destinations *int   `json:"destinations,omitempty"`
	Note         string `json:"note,omitempty"`
}

// postEvent publishes an event through the routes applied to the
// database: 201 when it created a row, 200 when every row existed (or the
// routes dropped it), 422 for an event publish() refuses.
func (s *API) postEvent(w http.ResponseWriter, r *http.Request) {
	req, status, err := decodeEventRequest(r.Body)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	published, err := s.Outbox.Publish(r.Context(), s.DB, req.Event())
	switch {
	case errors.Is(err, outboxd.ErrInvalidEvent), errors.Is(err, outboxd.ErrNoRoute):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	case err != nil:
		s.internalError(w, r, "publish", err)
		return
	}
	status = http.StatusOK
	messages := make([]publishedMessage, len(published))
	for i, p := range published {
		messages[i] = publishedMessage{Sink: p.Sink, ID: p.ID, Created: p.Created}
		if f := p.FanOut; f != nil {
			messages[i].Tenant, messages[i].Destinations, messages[i].Note = f.Tenant, &f.Destinations, f.Note()
		}
		if p.Created {
			status = http.StatusCreated
		}
	}
	writeBody(w, status, map[string]any{"messages": messages})
}

// StatsMaxAge is how old a stats snapshot GET /v1/stats serves may be:
// relays recompute it every operator.DefaultStatsInterval; an older one
// (no relay runs) is recomputed first.
const StatsMaxAge = 2 * operator.DefaultStatsInterval

func (s *API) getStats(w http.ResponseWriter, r *http.Request) {
	report, err := Stats(r.Context(), s.Config, s.Operator, s.DB, "api", StatsMaxAge)
	if err != nil {
		s.internalError(w, r, "stats", err)
		return
	}
	writeBody(w, http.StatusOK, report)
}

// getDeadLetters lists dead letters oldest first; after (the last id of
// the previous page) is the cursor, error filters on the last error's
// text.
func (s *API) getDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := operator.DeadLetterFilter{Sink: q.Get("sink"), ErrorContains: q.Get("error")}
	limit, err := positiveParam(q, "limit")
	if err == nil {
		f.After, err = positiveParam(q, "after")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Limit = int(min(limit, MaxDeadLetterLimit))
	letters, err := s.Operator.DeadLetters(r.Context(), s.DB, f)
	if err != nil {
		s.internalError(w, r, "list dead letters", err)
		return
	}
	if letters == nil {
		letters = []operator.DeadLetter{}
	}
	writeBody(w, http.StatusOK, letters)
}

// getReady answers 200 when the database is reachable and its outbox
// schema is current, 503 otherwise, so a pod takes traffic only when it
// can enqueue.
func (s *API) getReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), ReadinessTimeout)
	defer cancel()
	if err := ready(ctx, s.DB, s.Migrator); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.public)
		return
	}
	writeBody(w, http.StatusOK, map[string]string{"status": "ready"})
}

// notReady says why the process cannot serve yet: public is safe to show
// a client, cause holds the details for the log.
type notReady struct {
	public string
	cause  error
}

func (e *notReady) Error() string {
	if e.cause == nil {
		return e.public
	}
	return e.public + ": " + e.cause.Error()
}

func (e *notReady) Unwrap() error { return e.cause }

// Ready reports whether the database answers and needs no migration.
func Ready(ctx context.Context, db *pgxpool.Pool, m *migrate.Migrator) error {
	if nr := ready(ctx, db, m); nr != nil {
		return nr
	}
	return nil
}

// ready checks that the database answers and needs no migration.
func ready(ctx context.Context, db *pgxpool.Pool, m *migrate.Migrator) *notReady {
	if err := db.Ping(ctx); err != nil {
		return &notReady{public: "database unreachable", cause: err}
	}
	pending, err := m.Pending(ctx, db)
	if err != nil {
		return &notReady{public: "cannot read the outbox schema's migrations", cause: err}
	}
	if len(pending) > 0 {
		return &notReady{public: fmt.Sprintf("schema %s needs migrations %v: run outboxd migrate", m.Schema(), pending)}
	}
	return nil
}

// internalError logs err and tells the client only that it failed: no
// internals, no stack traces. A query that ran out of time is 503 saying
// so: the request may succeed later, and nothing is wrong with it.
func (s *API) internalError(w http.ResponseWriter, r *http.Request, op string, err error) {
	s.Log.ErrorContext(r.Context(), "http api: "+op+" failed", "method", r.Method, "path", r.URL.Path, telemetry.ErrAttr(err))
	if apidb.TimedOut(err) {
		writeError(w, http.StatusServiceUnavailable, op+" failed: "+apidb.Message(s.Config.HTTP.QueryTimeout))
		return
	}
	writeError(w, http.StatusInternalServerError, op+" failed; see the server log")
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeBody(w, status, map[string]string{"error": msg})
}

func writeBody(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

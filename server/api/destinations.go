package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/auditactor"
	"github.com/outboxd/outboxd/server/portal"
)

// The destinations endpoints: a tenant's webhook endpoints as data (see
// docs/destinations.md). Each route is listed with the role it needs
// (the team roles: operate to change, read to look).

// destinationRoute is one endpoint, the role it needs and what it does.
type destinationRoute struct {
	method, path string
	role         access.Role
	op           string
	status       int
	action       destinationAction
}

// destinationAction does one endpoint's work for the path's tenant and
// returns the answer's body.
type destinationAction func(s *API, r *http.Request, tenant string) (any, error)

// destinationEndpoints are the endpoints, one line each.
var destinationEndpoints = []destinationRoute{
	{http.MethodPost, "/v1/tenants/{tenant}/destinations", access.RoleOperate, "create destination", http.StatusCreated, (*API).createDestination},
	{http.MethodGet, "/v1/tenants/{tenant}/destinations", access.RoleRead, "list destinations", http.StatusOK, (*API).listDestinations},
	{http.MethodGet, "/v1/tenants/{tenant}/destinations/{id}", access.RoleRead, "get destination", http.StatusOK, (*API).showDestination},
	{http.MethodGet, "/v1/tenants/{tenant}/destinations/{id}/deliveries", access.RoleRead, "list deliveries", http.StatusOK, (*API).listDeliveries},
	{http.MethodPatch, "/v1/tenants/{tenant}/destinations/{id}", access.RoleOperate, "update destination", http.StatusOK, (*API).updateDestination},
	{http.MethodDelete, "/v1/tenants/{tenant}/destinations/{id}", access.RoleOperate, "delete destination", http.StatusOK, (*API).removeDestination},
	{http.MethodPost, "/v1/tenants/{tenant}/destinations/{id}/rotate-secret", access.RoleOperate, "rotate the secret", http.StatusOK, (*API).rotateSecret},
	{http.MethodPost, "/v1/tenants/{tenant}/destinations/{id}/disable", access.RoleOperate, "disable destination", http.StatusOK, (*API).disableDestination},
	{http.MethodPost, "/v1/tenants/{tenant}/destinations/{id}/enable", access.RoleOperate, "enable destination", http.StatusOK, (*API).enableDestination},
	{http.MethodPost, "/v1/tenants/{tenant}/destinations/{id}/test-event", access.RoleOperate, "send a test event", http.StatusAccepted, (*API).sendTestEvent},
	{http.MethodPost, "/v1/tenants/{tenant}/destinations/{id}/recover", access.RoleOperate, "recover destination", http.StatusOK, (*API).recoverDestination},
	{http.MethodPost, "/v1/tenants/{tenant}/portal", access.RoleOperate, "make a portal link", http.StatusOK, (*API).createPortalLink},
	{http.MethodGet, "/v1/tenants/{tenant}/event-types", access.RoleRead, "list event types", http.StatusOK, (*API).listEventTypes},
}

// destinationRoutes are the destinations endpoints as routes: the path's
// tenant checked, the action's answer or error written.
func (s *API) destinationRoutes() []route {
	routes := make([]route, 0, len(destinationEndpoints))
	for _, rt := range destinationEndpoints {
		routes = append(routes, route{method: rt.method, path: rt.path, role: rt.role, handler: func(w http.ResponseWriter, r *http.Request) {
			tenant := r.PathValue("tenant")
			if err := destinations.CheckTenant(tenant); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			body, err := rt.action(s, r, tenant)
			if err != nil {
				s.destinationError(w, r, rt.op, err)
				return
			}
			writeBody(w, rt.status, body)
		}})
	}
	return routes
}

// requestError is a request refused before it reached the store, with
// its HTTP status.
type requestError struct {
	status int
	err    error
}

func (e *requestError) Error() string { return e.err.Error() }

// decodeBody decodes the request's JSON body into v; optional lets it be
// absent.
func decodeBody(r *http.Request, v any, optional bool) error {
	if optional && r.ContentLength == 0 {
		return nil
	}
	if status, err := decodeStrict(r.Body, v); err != nil {
		return &requestError{status, err}
	}
	return nil
}

// DestinationPage is GET /v1/tenants/{tenant}/destinations' answer: a page
// of destinations and the cursor of the next ("" after the last), passed
// back as ?after=.
type DestinationPage struct {
	Destinations []destinations.Destination `json:"destinations"`
	Next         string                     `json:"next"`
}

// DestinationChange is the answer of delete, disable and enable: the
// destination and how many of its waiting rows went with it (delete) or
// moved (disable: now waiting; enable: now due). A delete's dry run
// (?dry_run=true) counts the rows that would go, deletes nothing, and
// answers the token that confirms the delete (?token=).
type DestinationChange struct {
	ID     string `json:"id"`
	Rows   int64  `json:"rows"`
	DryRun bool   `json:"dry_run,omitempty"`
	Token  string `json:"token,omitempty"`
}

// countChangedError is a delete whose token no longer names what it
// would take: answered 409 with the new count and its token, as a
// dead-letter action's confirmation is.
type countChangedError struct {
	DestinationChange
	err error
}

func (e *countChangedError) Error() string { return e.err.Error() }

// errNoDeleteToken refuses a delete that was not counted first.
var errNoDeleteToken = errors.New(`token: required: count first with ?dry_run=true, then confirm with its "token" (?token=...)`)

// RotatedSecret is POST .../rotate-secret's answer: the new secret, shown
// this once, and until when the old ones keep signing.
type RotatedSecret struct {
	ID          string    `json:"id"`
	Secret      string    `json:"secret"`
	OldExpireAt time.Time `json:"old_secrets_expire_at"`
}

// rotateRequest is POST .../rotate-secret's body: how long the old
// secrets keep signing ("24h"; none: they stop at once).
type rotateRequest struct {
	Overlap string `json:"overlap"`
}

// disableRequest is POST .../disable's optional body.
type disableRequest struct {
	Reason string `json:"reason"`
}

// defaultDisableReason is the reason of a disable that gives none.
const defaultDisableReason = "disabled by hand"

// destinationError answers for err of an action on a destination.
func (s *API) destinationError(w http.ResponseWriter, r *http.Request, op string, err error) {
	var (
		input   *destinations.InputError
		quota   *destinations.QuotaError
		req     *requestError
		changed *countChangedError
		recov   *recoverChangedError
	)
	switch {
	case errors.As(err, &req):
		writeError(w, req.status, req.Error())
	case errors.As(err, &changed):
		writeBody(w, http.StatusConflict, map[string]any{"error": changed.Error(), "id": changed.ID, "rows": changed.Rows, "token": changed.Token})
	case errors.As(err, &recov):
		writeBody(w, http.StatusConflict, map[string]any{"error": recov.Error(), "id": recov.ID, "dead": recov.Dead,
			"delivered": recov.Delivered, "rows": recov.Rows, "token": recov.Token})
	case errors.Is(err, destinations.ErrInvalidToken):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.As(err, &quota):
		quota.RetryAfterHeader(w.Header())
		writeError(w, quota.HTTPStatus(), quota.Error())
	case errors.As(err, &input):
		// A well-formed request with a value refused, as everywhere in
		// the API.
		writeError(w, http.StatusUnprocessableEntity, input.Error())
	case errors.Is(err, destinations.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("tenant %s has no destination %s", r.PathValue("tenant"), r.PathValue("id")))
	case errors.Is(err, destinations.ErrNoKeyring):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		s.internalError(w, r, op, err)
	}
}

func (s *API) createDestination(r *http.Request, tenant string) (any, error) {
	var spec destinations.Spec
	if err := decodeBody(r, &spec, false); err != nil {
		return nil, err
	}
	return s.Destinations.Create(r.Context(), s.DB, auditactor.Of(identity(r)), tenant, spec)
}

func (s *API) listDestinations(r *http.Request, tenant string) (any, error) {
	limit, err := positiveParam(r.URL.Query(), "limit")
	if err != nil {
		return nil, &requestError{http.StatusBadRequest, err}
	}
	ds, next, err := s.Destinations.List(r.Context(), s.DB, tenant, r.URL.Query().Get("after"), int(limit))
	return DestinationPage{Destinations: ds, Next: next}, err
}

// DeliveryPage is GET .../{id}/deliveries' answer: the destination's rows
// newest first with their attempts, and the cursor of the next page (0
// after the last), passed back as ?before=.
type DeliveryPage struct {
	Deliveries []destinations.Delivery `json:"deliveries"`
	Next       int64                   `json:"next"`
}

func (s *API) listDeliveries(r *http.Request, tenant string) (any, error) {
	q := r.URL.Query()
	limit, err := positiveParam(q, "limit")
	if err != nil {
		return nil, &requestError{http.StatusBadRequest, err}
	}
	before, err := positiveParam(q, "before")
	if err != nil {
		return nil, &requestError{http.StatusBadRequest, err}
	}
	ds, next, err := s.Destinations.Deliveries(r.Context(), s.DB, tenant, r.PathValue("id"), before, int(limit))
	// An answer about one tenant's destination may be shown to the
	// tenant: its errors hold no internal network facts.
	return DeliveryPage{Deliveries: destinations.ForTenant(ds), Next: next}, err
}

func (s *API) updateDestination(r *http.Request, tenant string) (any, error) {
	var p destinations.Patch
	if err := decodeBody(r, &p, false); err != nil {
		return nil, err
	}
	return s.Destinations.Update(r.Context(), s.DB, auditactor.Of(identity(r)), tenant, r.PathValue("id"), p)
}

// boolParam reads an optional boolean: true or false; false when absent.
func boolParam(q url.Values, name string) (bool, error) {
	switch v := q.Get(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("%s: want true or false, got %q", name, v)
	}
}

// removeDestination counts what deleting a destination takes
// (?dry_run=true, answering a token) or deletes it with that token
// (?token=), which must still name what it takes: every destructive
// action counts first (docs/operations.md, "Destructive commands"), as
// the dead-letter actions' dry runs and tokens do.
func (s *API) removeDestination(r *http.Request, tenant string) (any, error) {
	id := r.PathValue("id")
	dryRun, err := boolParam(r.URL.Query(), "dry_run")
	if err != nil {
		return nil, &requestError{http.StatusBadRequest, err}
	}
	token := r.URL.Query().Get("token")
	switch {
	case dryRun && token != "":
		return nil, &requestError{http.StatusUnprocessableEntity, errors.New("token: a dry run takes no token")}
	case dryRun:
		c, err := s.Destinations.CountDelete(r.Context(), s.DB, tenant, id)
		return DestinationChange{ID: id, Rows: c.Rows, DryRun: true, Token: c.Token}, err
	case token == "":
		return nil, &requestError{http.StatusUnprocessableEntity, errNoDeleteToken}
	}
	who := identity(r)
	c, err := s.Destinations.DeleteCounted(r.Context(), s.DB, auditactor.Of(who), tenant, id, token)
	if errors.Is(err, destinations.ErrCountChanged) {
		return nil, &countChangedError{DestinationChange{ID: id, Rows: c.Rows, Token: c.Token}, err}
	}
	if err != nil {
		return nil, err
	}
	s.Log.InfoContext(r.Context(), "destination deleted", "tenant", tenant, "destination", id, "waiting_rows_deleted", c.Rows, "by", who.Name, "source", who.Source)
	return DestinationChange{ID: id, Rows: c.Rows}, nil
}

func (s *API) rotateSecret(r *http.Request, tenant string) (any, error) {
	var req rotateRequest
	if err := decodeBody(r, &req, true); err != nil {
		return nil, err
	}
	var overlap time.Duration
	if req.Overlap != "" {
		var err error
		if overlap, err = time.ParseDuration(req.Overlap); err != nil {
			return nil, &requestError{http.StatusUnprocessableEntity, fmt.Errorf("overlap: want a duration such as 24h, got %q", req.Overlap)}
		}
	}
	id, now := r.PathValue("id"), time.Now()
	secret, err := s.Destinations.RotateSecret(r.Context(), s.DB, auditactor.Of(identity(r)), tenant, id, overlap)
	return RotatedSecret{ID: id, Secret: secret, OldExpireAt: now.Add(overlap).UTC()}, err
}

func (s *API) disableDestination(r *http.Request, tenant string) (any, error) {
	var req disableRequest
	if err := decodeBody(r, &req, true); err != nil {
		return nil, err
	}
	if req.Reason == "" {
		req.Reason = defaultDisableReason
	}
	return s.setDestinationEnabled(r, tenant, false, req.Reason)
}

func (s *API) enableDestination(r *http.Request, tenant string) (any, error) {
	return s.setDestinationEnabled(r, tenant, true, "")
}

func (s *API) setDestinationEnabled(r *http.Request, tenant string, enabled bool, reason string) (any, error) {
	id := r.PathValue("id")
	n, err := s.Destinations.SetEnabled(r.Context(), s.DB, auditactor.Of(identity(r)), tenant, id, enabled, reason)
	return DestinationChange{ID: id, Rows: n}, err
}

// PortalLink is POST /v1/tenants/{tenant}/portal's answer: the signed
// link that opens the tenant's portal, and when it expires.
type PortalLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// portalRequest is POST /v1/tenants/{tenant}/portal's optional body: how
// long the link lasts ("1h"; none: portal.DefaultLinkLifetime).
type portalRequest struct {
	ExpiresIn string `json:"expires_in"`
}

// errPortalNotServed refuses a portal link no page would open.
var errPortalNotServed = errors.New("the tenant portal is served with the console, which http.ui: false turns off")

// createPortalLink signs a link to the tenant's portal, below the scheme
// and host the request came to. The link is a credential: it is answered,
// never logged.
func (s *API) createPortalLink(r *http.Request, tenant string) (any, error) {
	var req portalRequest
	if err := decodeBody(r, &req, true); err != nil {
		return nil, err
	}
	lifetime := portal.DefaultLinkLifetime
	if req.ExpiresIn != "" {
		var err error
		if lifetime, err = time.ParseDuration(req.ExpiresIn); err != nil {
			return nil, &requestError{http.StatusUnprocessableEntity, fmt.Errorf("expires_in: want a duration such as 1h, got %q", req.ExpiresIn)}
		}
	}
	if err := portal.CheckLifetime(lifetime); err != nil {
		return nil, &requestError{http.StatusUnprocessableEntity, fmt.Errorf("expires_in: %w", err)}
	}
	if s.Portal == nil {
		return nil, destinations.ErrNoKeyring
	}
	if !s.Config.HTTP.UI {
		return nil, &requestError{http.StatusServiceUnavailable, errPortalNotServed}
	}
	who, _ := access.IdentityOf(r.Context())
	link, expires, err := s.Portal.Link(portal.BaseURL(r), tenant, who.Name, time.Now().Add(lifetime))
	if err != nil {
		return nil, err
	}
	// Recorded before it is answered: a link is a credential to act as
	// the tenant, so who minted it, for whom and until when is audited.
	if err := s.Destinations.RecordPortalLink(r.Context(), s.DB, auditactor.Of(identity(r)), tenant, expires); err != nil {
		return nil, err
	}
	s.Log.InfoContext(r.Context(), "portal link made", "tenant", tenant, "expires_at", expires, "by", who.Name, "source", who.Source)
	return PortalLink{URL: link, ExpiresAt: expires}, nil
}

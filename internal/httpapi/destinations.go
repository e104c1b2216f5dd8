package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// The destinations endpoints: a tenant's webhook endpoints as data (see
// docs/destinations.md). Each route is listed with the role it needs
// (the team roles: operate to change, read to look).

// destinationRoute is one endpoint and the role it needs.
type destinationRoute struct {
	pattern string
	role    string
	handler func(*API) http.HandlerFunc
}

// destinationRoutes are the endpoints, one line each.
var destinationRoutes = []destinationRoute{
	{"POST /v1/tenants/{tenant}/destinations", "operate", func(s *API) http.HandlerFunc { return s.postDestination }},
	{"GET /v1/tenants/{tenant}/destinations", "read", func(s *API) http.HandlerFunc { return s.getDestinations }},
	{"GET /v1/tenants/{tenant}/destinations/{id}", "read", func(s *API) http.HandlerFunc { return s.getDestination }},
	{"PATCH /v1/tenants/{tenant}/destinations/{id}", "operate", func(s *API) http.HandlerFunc { return s.patchDestination }},
	{"DELETE /v1/tenants/{tenant}/destinations/{id}", "operate", func(s *API) http.HandlerFunc { return s.deleteDestination }},
	{"POST /v1/tenants/{tenant}/destinations/{id}/rotate-secret", "operate", func(s *API) http.HandlerFunc { return s.postRotateSecret }},
	{"POST /v1/tenants/{tenant}/destinations/{id}/disable", "operate", func(s *API) http.HandlerFunc { return s.postDisableDestination }},
	{"POST /v1/tenants/{tenant}/destinations/{id}/enable", "operate", func(s *API) http.HandlerFunc { return s.postEnableDestination }},
}

// handleDestinations registers the destinations endpoints on mux.
func (s *API) handleDestinations(mux *http.ServeMux) {
	for _, r := range destinationRoutes {
		mux.HandleFunc(r.pattern, r.handler(s))
	}
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
// moved (disable: now waiting; enable: now due).
type DestinationChange struct {
	ID   string `json:"id"`
	Rows int64  `json:"rows"`
}

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

// tenantOf reads and checks the path's tenant, answering 400 when it is
// not one.
func tenantOf(w http.ResponseWriter, r *http.Request) (string, bool) {
	tenant := r.PathValue("tenant")
	if err := destinations.CheckTenant(tenant); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return "", false
	}
	return tenant, true
}

// destinationError answers for err of an action on a destination.
func (s *API) destinationError(w http.ResponseWriter, r *http.Request, op string, err error) {
	var input *destinations.InputError
	switch {
	case errors.As(err, &input):
		writeError(w, http.StatusBadRequest, input.Error())
	case errors.Is(err, destinations.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("tenant %s has no destination %s", r.PathValue("tenant"), r.PathValue("id")))
	case errors.Is(err, destinations.ErrNoKeyring):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		s.internalError(w, r, op, err)
	}
}

func (s *API) postDestination(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	var spec destinations.Spec
	if status, err := decodeStrict(r.Body, &spec); err != nil {
		writeError(w, status, err.Error())
		return
	}
	c, err := s.Destinations.Create(r.Context(), s.DB, tenant, spec)
	if err != nil {
		s.destinationError(w, r, "create destination", err)
		return
	}
	writeBody(w, http.StatusCreated, c)
}

func (s *API) getDestinations(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	limit, err := positiveParam(r.URL.Query(), "limit")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ds, next, err := s.Destinations.List(r.Context(), s.DB, tenant, r.URL.Query().Get("after"), int(limit))
	if err != nil {
		s.destinationError(w, r, "list destinations", err)
		return
	}
	writeBody(w, http.StatusOK, DestinationPage{Destinations: ds, Next: next})
}

func (s *API) getDestination(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	d, err := s.Destinations.Get(r.Context(), s.DB, tenant, r.PathValue("id"))
	if err != nil {
		s.destinationError(w, r, "get destination", err)
		return
	}
	writeBody(w, http.StatusOK, d)
}

func (s *API) patchDestination(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	var p destinations.Patch
	if status, err := decodeStrict(r.Body, &p); err != nil {
		writeError(w, status, err.Error())
		return
	}
	d, err := s.Destinations.Update(r.Context(), s.DB, tenant, r.PathValue("id"), p)
	if err != nil {
		s.destinationError(w, r, "update destination", err)
		return
	}
	writeBody(w, http.StatusOK, d)
}

func (s *API) deleteDestination(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	n, err := s.Destinations.Delete(r.Context(), s.DB, tenant, id)
	if err != nil {
		s.destinationError(w, r, "delete destination", err)
		return
	}
	s.Log.InfoContext(r.Context(), "destination deleted", "tenant", tenant, "destination", id, "waiting_rows_deleted", n, "client", clientHost(r))
	writeBody(w, http.StatusOK, DestinationChange{ID: id, Rows: n})
}

func (s *API) postRotateSecret(w http.ResponseWriter, r *http.Request) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	var req rotateRequest
	if status, err := decodeOptional(r, &req); err != nil {
		writeError(w, status, err.Error())
		return
	}
	var overlap time.Duration
	if req.Overlap != "" {
		var err error
		if overlap, err = time.ParseDuration(req.Overlap); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("overlap: want a duration such as 24h, got %q", req.Overlap))
			return
		}
	}
	id := r.PathValue("id")
	now := time.Now()
	secret, err := s.Destinations.RotateSecret(r.Context(), s.DB, tenant, id, overlap)
	if err != nil {
		s.destinationError(w, r, "rotate the secret", err)
		return
	}
	writeBody(w, http.StatusOK, RotatedSecret{ID: id, Secret: secret, OldExpireAt: now.Add(overlap).UTC()})
}

func (s *API) postDisableDestination(w http.ResponseWriter, r *http.Request) {
	var req disableRequest
	if status, err := decodeOptional(r, &req); err != nil {
		writeError(w, status, err.Error())
		return
	}
	if req.Reason == "" {
		req.Reason = defaultDisableReason
	}
	s.setDestinationEnabled(w, r, false, req.Reason)
}

func (s *API) postEnableDestination(w http.ResponseWriter, r *http.Request) {
	s.setDestinationEnabled(w, r, true, "")
}

func (s *API) setDestinationEnabled(w http.ResponseWriter, r *http.Request, enabled bool, reason string) {
	tenant, ok := tenantOf(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	n, err := s.Destinations.SetEnabled(r.Context(), s.DB, tenant, id, enabled, reason)
	if err != nil {
		s.destinationError(w, r, "enable or disable destination", err)
		return
	}
	writeBody(w, http.StatusOK, DestinationChange{ID: id, Rows: n})
}

// decodeOptional decodes a body that may be absent (no body, or empty).
func decodeOptional(r *http.Request, v any) (int, error) {
	if r.ContentLength == 0 {
		return 0, nil
	}
	return decodeStrict(r.Body, v)
}

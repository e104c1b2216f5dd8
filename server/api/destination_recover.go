package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/internal/auditactor"
)

// recoverRequest is POST .../{id}/recover's body: the window of events
// to send again (RFC 3339 times; until absent: up to now), whether the
// delivered ones go too, and either dry_run (count, answering a token)
// or the count's token (confirm). dry_run and token may also be given as
// query parameters, as a delete's are.
type recoverRequest struct {
	Since            string `json:"since"`
	Until            string `json:"until"`
	IncludeDelivered bool   `json:"include_delivered"`
	DryRun           bool   `json:"dry_run"`
	Token            string `json:"token"`
}

// RecoverAnswer is POST .../{id}/recover's answer: what the window holds
// (dead, delivered, rows), and either the token that confirms sending
// exactly those (dry_run) or how many were sent again (recovered). A
// confirmation whose events changed answers 409 with the new count and
// its token.
type RecoverAnswer struct {
	ID string `json:"id"`
	destinations.RecoverCount
	DryRun    bool  `json:"dry_run"`
	Recovered int64 `json:"recovered"`
}

// recoverChangedError is a recovery whose token no longer names the
// window's events: answered 409 with the new count and its token.
type recoverChangedError struct {
	RecoverAnswer
	err error
}

func (e *recoverChangedError) Error() string { return e.err.Error() }

// errNoRecoverToken refuses a recovery that was not counted first.
var errNoRecoverToken = errors.New(`token: required: count first with "dry_run": true (or ?dry_run=true), then confirm with its "token"`)

// window reads the request's window, naming the field it refuses.
func (req recoverRequest) window() (destinations.Recovery, error) {
	r := destinations.Recovery{IncludeDelivered: req.IncludeDelivered}
	if req.Since == "" {
		return r, errors.New("since: required: an RFC 3339 time such as 2026-01-02T14:00:00Z")
	}
	var err error
	if r.Since, err = time.Parse(time.RFC3339, req.Since); err != nil {
		return r, fmt.Errorf("since: want an RFC 3339 time such as 2026-01-02T14:00:00Z, got %q", req.Since)
	}
	if req.Until != "" {
		until, err := time.Parse(time.RFC3339, req.Until)
		if err != nil {
			return r, fmt.Errorf("until: want an RFC 3339 time such as 2026-01-02T15:00:00Z, got %q", req.Until)
		}
		r.Until = &until
	}
	return r, nil
}

// recoverDestination counts a destination's events of a window
// (dry_run, answering a token) or sends them again with that token, which
// must still name them: every action on many rows counts first
// (docs/operations.md, "Destructive commands"), as the dead-letter
// actions' dry runs and tokens do.
func (s *API) recoverDestination(r *http.Request, tenant string) (any, error) {
	var req recoverRequest
	if err := decodeBody(r, &req, false); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	dryRun, err := boolParam(q, "dry_run")
	if err != nil {
		return nil, &requestError{http.StatusBadRequest, err}
	}
	dryRun = dryRun || req.DryRun
	if req.Token == "" {
		req.Token = q.Get("token")
	}
	window, err := req.window()
	if err != nil {
		return nil, &requestError{http.StatusUnprocessableEntity, err}
	}
	id := r.PathValue("id")
	switch {
	case dryRun && req.Token != "":
		return nil, &requestError{http.StatusUnprocessableEntity, errors.New("token: a dry run takes no token")}
	case dryRun:
		c, err := s.Destinations.CountRecover(r.Context(), s.DB, tenant, id, window)
		return RecoverAnswer{ID: id, RecoverCount: c, DryRun: true}, err
	case req.Token == "":
		return nil, &requestError{http.StatusUnprocessableEntity, errNoRecoverToken}
	}
	who := identity(r)
	c, err := s.Destinations.Recover(r.Context(), s.DB, auditactor.Of(who), tenant, id, window, req.Token)
	if errors.Is(err, destinations.ErrRecoveryChanged) {
		return nil, &recoverChangedError{RecoverAnswer{ID: id, RecoverCount: c}, err}
	}
	if err != nil {
		return nil, err
	}
	s.Log.InfoContext(r.Context(), "destination recovered", "tenant", tenant, "destination", id, "dead", c.Dead,
		"delivered", c.Delivered, "by", who.Name, "source", who.Source)
	c.Token = ""
	return RecoverAnswer{ID: id, RecoverCount: c, Recovered: c.Rows}, nil
}

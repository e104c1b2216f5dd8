package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/auditactor"
)

// The operator endpoints of the API: message lookup and search, dead-letter
// actions with dry runs, and sink pauses by hand.

// MessageReport is a message as GET /v1/messages/{id} and `outboxd get
// --json` show it: the stored row and its trace id.
type MessageReport struct {
	operator.StoredMessage
	TraceID string `json:"trace_id,omitempty"`
}

// NewMessageReport is m with its trace id.
func NewMessageReport(m operator.StoredMessage) MessageReport {
	return MessageReport{StoredMessage: m, TraceID: m.TraceID()}
}

func (s *API) getMessage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "id: want a positive whole number")
		return
	}
	m, err := s.Operator.Message(r.Context(), s.DB, id)
	switch {
	case errors.Is(err, operator.ErrMessageNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no message with id %d", id))
		return
	case err != nil:
		s.internalError(w, r, "look up message", err)
		return
	}
	writeBody(w, http.StatusOK, NewMessageReport(m))
}

func (s *API) getMessages(w http.ResponseWriter, r *http.Request) {
	f, err := messageFilterOf(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.Operator.Messages(r.Context(), s.DB, f)
	if err != nil {
		s.internalError(w, r, "search messages", err)
		return
	}
	writeBody(w, http.StatusOK, page)
}

// messageFilterOf reads the query parameters of GET /v1/messages: sink,
// status, dedup_key, since and until (RFC 3339), before (the cursor) and
// limit.
func messageFilterOf(q url.Values) (operator.MessageFilter, error) {
	f := operator.MessageFilter{Sink: q.Get("sink"), Status: status.Row(q.Get("status")), DedupKey: q.Get("dedup_key")}
	if err := CheckStatus(f.Status); err != nil {
		return f, err
	}
	var err error
	if f.Before, err = positiveParam(q, "before"); err != nil {
		return f, err
	}
	limit, err := positiveParam(q, "limit")
	if err != nil {
		return f, err
	}
	f.Limit = int(min(limit, operator.MaxMessageLimit))
	for name, dst := range map[string]*time.Time{"since": &f.CreatedFrom, "until": &f.CreatedBefore} {
		if v := q.Get(name); v != "" {
			if *dst, err = time.Parse(time.RFC3339, v); err != nil {
				return f, fmt.Errorf("%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", name, v)
			}
		}
	}
	return f, nil
}

// messageStatuses are the statuses a search may ask for.
var messageStatuses = status.Rows()

// MessageStatuses returns the statuses a search may ask for (the command
// line completes them).
func MessageStatuses() []status.Row { return slices.Clone(messageStatuses) }

// CheckStatus accepts "" (any status) and the statuses rows have.
func CheckStatus(s status.Row) error {
	if s == "" || slices.Contains(messageStatuses, s) {
		return nil
	}
	return fmt.Errorf("status: want one of %v, got %q", messageStatuses, s)
}

// positiveParam reads an optional positive whole number; 0 when absent.
func positiveParam(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: want a positive whole number, got %q", name, v)
	}
	return n, nil
}

// deadLetterActionRequest is the body of POST /v1/dlq/redrive and
// /v1/dlq/purge: ids, or all dead letters (of a sink, with an error
// containing a text), optionally as a dry run; a confirmation carries the
// dry run's token.
type deadLetterActionRequest struct {
	IDs     []int64 `json:"ids"`
	All     bool    `json:"all"`
	Sink    string  `json:"sink"`
	Error   string  `json:"error"`
	Token   string  `json:"token"`
	Waiting bool    `json:"waiting"`
	DryRun  bool    `json:"dry_run"`
	// Destination keeps the rows of one destination (purge only).
	Destination string `json:"destination"`
	// UpToID is refused: an id bound let a confirmation act on older rows
	// that died after the count.
	UpToID *int64 `json:"up_to_id"`
}

func (req deadLetterActionRequest) filter() operator.RedriveFilter {
	return operator.RedriveFilter{IDs: req.IDs, All: req.All, Sink: req.Sink, Destination: req.Destination, ErrorContains: req.Error,
		Token: req.Token, Waiting: req.Waiting, DryRun: req.DryRun}
}

// errUpToID answers a request that bounds its selection by id.
const errUpToID = `up_to_id: an id bound does not name what a dry run counted (rows die in attempt order, not id order); ` +
	`confirm with the dry run's "token"`

// SelectionWords spell the fields of a dead-letter selection the way its
// callers know them: JSON fields of the API, flags of the CLI.
type SelectionWords struct{ IDs, All, Sink, Error, Waiting, Destination string }

// apiSelection are the JSON fields of a selection.
var apiSelection = SelectionWords{`"ids"`, `"all": true`, `"sink"`, `"error"`, `"waiting"`, `"destination"`}

// CheckSelection refuses a selection of nothing and ids mixed with the
// filters of "all", naming the fields in words.
func CheckSelection(f operator.RedriveFilter, w SelectionWords) error {
	switch {
	case len(f.IDs) == 0 && !f.All:
		return fmt.Errorf("give %s or %s", w.IDs, w.All)
	case len(f.IDs) > 0 && (f.All || f.Sink != "" || f.ErrorContains != "" || f.Waiting || f.Destination != ""):
		return fmt.Errorf("%s cannot be combined with %s, %s, %s, %s or %s", w.IDs, w.All, w.Sink, w.Error, w.Waiting, w.Destination)
	case f.Waiting && (!f.All || (f.Sink == "" && f.Destination == "")):
		return fmt.Errorf("%s needs %s and %s or %s", w.Waiting, w.All, w.Sink, w.Destination)
	}
	return nil
}

// DeadLetterAction is Operator.Redrive or Operator.Purge.
type DeadLetterAction func(*operator.Operator, context.Context, audit.DB, audit.Actor, operator.RedriveFilter) (operator.ActionResult, error)

func (s *API) postRedrive(w http.ResponseWriter, r *http.Request) {
	s.deadLetterAction(w, r, "redrive", "redriven", (*operator.Operator).Redrive)
}

func (s *API) postPurge(w http.ResponseWriter, r *http.Request) {
	s.deadLetterAction(w, r, "purge", "purged", (*operator.Operator).Purge)
}

// deadLetterAction answers {"<done>": N, "dry_run", "last_id", "token",
// "missing"}: missing lists the requested ids that named no dead letter,
// token names the rows counted. A confirmation (token) whose selection
// changed answers 409 with the error, nothing done, and the new count as
// "rows" with its token.
func (s *API) deadLetterAction(w http.ResponseWriter, r *http.Request, name, done string, action DeadLetterAction) {
	var req deadLetterActionRequest
	if status, err := decodeStrict(r.Body, &req); err != nil {
		writeError(w, status, err.Error())
		return
	}
	if req.UpToID != nil {
		writeError(w, http.StatusUnprocessableEntity, errUpToID)
		return
	}
	f := req.filter()
	if err := CheckSelection(f, apiSelection); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	if f.Waiting && name == "redrive" {
		writeError(w, http.StatusUnprocessableEntity, "waiting: redrive moves dead letters only")
		return
	}
	if f.Destination != "" && name == "redrive" {
		writeError(w, http.StatusUnprocessableEntity, "destination: purge only; redrive selects by ids, sink and error")
		return
	}
	res, err := action(s.Operator, r.Context(), s.DB, auditactor.Of(identity(r)), f)
	switch {
	case errors.Is(err, operator.ErrInvalidToken):
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("token: %q is not the token of a dry run", f.Token))
		return
	case errors.Is(err, operator.ErrSelectionChanged):
		writeBody(w, http.StatusConflict, map[string]any{"error": err.Error(), "rows": res.Rows, "last_id": res.LastID,
			"token": res.Token, "missing": res.Missing})
		return
	case err != nil:
		s.internalError(w, r, name, err)
		return
	}
	writeBody(w, http.StatusOK, ActionAnswer(done, res))
}

// ActionAnswer is the JSON answer of a redrive or a purge (done is
// "redriven" or "purged"): the API's, and `outboxd dlq redrive|purge -o
// json`'s.
func ActionAnswer(done string, res operator.ActionResult) map[string]any {
	return map[string]any{done: res.Rows, "dry_run": res.DryRun, "last_id": res.LastID, "token": res.Token, "missing": res.Missing}
}

// pauseRequest is the body of POST /v1/sinks/{name}/pause and /resume:
// for (a Go duration; absent pauses until resumed), who and why, and force
// (a pause only) to pause a sink that is neither configured nor known to
// the outbox.
type pauseRequest struct {
	For    string `json:"for"`
	By     string `json:"by"`
	Reason string `json:"reason"`
	Force  bool   `json:"force"`
}

func (s *API) postPause(w http.ResponseWriter, r *http.Request) {
	sink, req, ok := s.decodePause(w, r)
	if !ok {
		return
	}
	var d time.Duration
	if req.For != "" {
		var err error
		if d, err = time.ParseDuration(req.For); err != nil || d <= 0 {
			writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("for: want a positive duration such as 15m, got %q", req.For))
			return
		}
	}
	if !req.Force {
		_, configured := s.Config.Sinks[sink]
		err := s.Operator.CheckSinkKnown(r.Context(), s.DB, sink, configured)
		if errors.Is(err, operator.ErrUnknownSink) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no sink %q: it is not configured and has no messages; send \"force\": true to pause it anyway", sink))
			return
		}
		if err != nil {
			s.internalError(w, r, "pause sink", err)
			return
		}
	}
	if _, err := s.Operator.PauseSink(r.Context(), s.DB, auditactor.Of(identity(r)), sink, operator.Pause{For: d, By: req.By, Reason: req.Reason}); err != nil {
		s.internalError(w, r, "pause sink", err)
		return
	}
	s.Log.InfoContext(r.Context(), "sink paused by hand", "sink", sink, "for", d, "by", req.By, "reason", req.Reason)
	s.writeSinkState(w, r, sink)
}

func (s *API) postResume(w http.ResponseWriter, r *http.Request) {
	sink, req, ok := s.decodePause(w, r)
	if !ok {
		return
	}
	if req.For != "" || req.Force {
		writeError(w, http.StatusUnprocessableEntity, "for, force: a resume takes neither")
		return
	}
	res, err := s.Operator.ResumeSink(r.Context(), s.DB, auditactor.Of(identity(r)), sink, req.By, req.Reason)
	if err != nil {
		s.internalError(w, r, "resume sink", err)
		return
	}
	s.Log.InfoContext(r.Context(), "sink resumed by hand", "sink", sink, "by", req.By, "reason", req.Reason)
	res.LogClosed(r.Context(), s.Log, req.By)
	s.writeSinkState(w, r, sink)
}

// deletePause forgets a sink's recorded state (DELETE
// /v1/sinks/{name}/pause): a stale pause of a name that is not configured,
// such as a typo's. The request's body, if any, is not read.
func (s *API) deletePause(w http.ResponseWriter, r *http.Request) {
	sink := r.PathValue("name")
	if err := CheckSinkName(sink); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	_, configured := s.Config.Sinks[sink]
	id := identity(r)
	was, err := s.Operator.ForgetSink(r.Context(), s.DB, auditactor.Of(id), sink, configured)
	switch {
	case errors.Is(err, operator.ErrUnknownSink):
		writeError(w, http.StatusNotFound, fmt.Sprintf("sink %q has no recorded pause or state", sink))
		return
	case errors.Is(err, operator.ErrConfiguredSink):
		writeError(w, http.StatusConflict, fmt.Sprintf("sink %q is configured: resume it instead (POST /v1/sinks/%s/resume)", sink, sink))
		return
	case err != nil:
		s.internalError(w, r, "forget sink", err)
		return
	}
	s.Log.InfoContext(r.Context(), "sink state forgotten by hand", "sink", sink, "was_paused", was, "by", id.Name)
	writeBody(w, http.StatusOK, map[string]any{"sink": sink, "forgotten": true, "was_paused": was})
}

// decodePause reads the sink name and body of a pause or resume, with who
// as the sink records it (see access.Identity.RecordedBy).
func (s *API) decodePause(w http.ResponseWriter, r *http.Request) (string, pauseRequest, bool) {
	var req pauseRequest
	if status, err := decodeStrict(r.Body, &req); err != nil {
		writeError(w, status, err.Error())
		return "", req, false
	}
	sink := r.PathValue("name")
	if err := CheckSinkName(sink); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return "", req, false
	}
	req.By = identity(r).RecordedBy(req.By, "api from "+identity(r).Source)
	return sink, req, true
}

// identity is who the request comes from (authenticate put it there).
func identity(r *http.Request) access.Identity {
	id, _ := access.IdentityOf(r.Context())
	return id
}

// CheckSinkName accepts the names a sink can have (see config.ValidSinkName).
func CheckSinkName(sink string) error {
	if !config.ValidSinkName(sink) {
		return fmt.Errorf("sink: %q is not a sink name (lower-case letters, digits, '-' and '_')", sink)
	}
	return nil
}

// writeSinkState answers with the sink's pause state after a change.
func (s *API) writeSinkState(w http.ResponseWriter, r *http.Request, sink string) {
	states, err := s.Operator.SinkStates(r.Context(), s.DB)
	if err != nil {
		s.internalError(w, r, "read sink state", err)
		return
	}
	state := states[sink]
	state.Sink = sink
	writeBody(w, http.StatusOK, state)
}

package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/server/internal/apidb"
	"github.com/outboxd/outboxd/server/internal/auditactor"
)

// Page sizes of the lists.
const (
	messagesPerPage    = 50
	deadLettersPerPage = 50
)

// formTime is how the search form's time fields are written (UTC).
const formTime = "2006-01-02T15:04"

// statuses are the ones the search form offers.
var statuses = status.Rows()

func (c *Console) getMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ctx, cancel := c.context(r)
	defer cancel()
	data := map[string]any{"Q": q, "Statuses": statuses, "Sinks": c.sinkNames()}
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil && n > 0 {
			http.Redirect(w, r, "/messages/"+strconv.FormatInt(n, 10), http.StatusSeeOther)
			return
		}
		data["Error"] = fmt.Sprintf("%q is not a message id.", id)
		c.render(w, r, http.StatusBadRequest, "messages", data)
		return
	}
	f, err := messageFilter(q)
	if err != nil {
		data["Error"] = err.Error()
		c.render(w, r, http.StatusBadRequest, "messages", data)
		return
	}
	if f.Sink != "" && f.DedupKey != "" {
		m, err := c.opt.Operator.MessageByKey(ctx, c.opt.DB, f.Sink, f.DedupKey)
		if err == nil {
			http.Redirect(w, r, "/messages/"+strconv.FormatInt(m.ID, 10), http.StatusSeeOther)
			return
		}
		if !errors.Is(err, operator.ErrMessageNotFound) {
			c.internalError(w, r, "look up the message", err)
			return
		}
	}
	page, err := c.opt.Operator.Messages(ctx, c.opt.DB, f)
	if err != nil {
		c.internalError(w, r, "search messages", err)
		return
	}
	data["Page"] = page
	if page.Next != 0 {
		next := cloneValues(q)
		next.Set("before", strconv.FormatInt(page.Next, 10))
		data["Next"] = "/messages?" + next.Encode()
	}
	c.render(w, r, http.StatusOK, "messages", data)
}

// messageFilter reads the search form.
func messageFilter(q url.Values) (operator.MessageFilter, error) {
	f := operator.MessageFilter{Sink: strings.TrimSpace(q.Get("sink")), DedupKey: q.Get("key"),
		Status: status.Row(q.Get("status")), Limit: messagesPerPage}
	if f.Status != "" && !slices.Contains(statuses, f.Status) {
		return f, fmt.Errorf("%q is not a status", f.Status)
	}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return f, fmt.Errorf("%q is not a cursor", b)
		}
		f.Before = n
	}
	for field, dst := range map[string]*time.Time{"since": &f.CreatedFrom, "until": &f.CreatedBefore} {
		if v := q.Get(field); v != "" {
			t, err := time.Parse(formTime, v)
			if err != nil {
				return f, fmt.Errorf("%s: %q is not a time like 2026-01-02T15:04 (UTC)", field, v)
			}
			*dst = t
		}
	}
	return f, nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = slices.Clone(v)
	}
	return out
}

// messageView is a message with its JSON made readable.
type messageView struct {
	operator.StoredMessage
	PayloadText, ReceiptText string
	Trace                    string
	TraceLink                string
	Headers                  [][2]string
	// Tried are the failed attempts, each marked when a redrive came
	// before it.
	Tried []triedAttempt
}

// triedAttempt is a failed attempt as the message page lists it.
type triedAttempt struct {
	operator.AttemptError
	// AfterRedrive marks the first attempt after a redrive: a redrive
	// resets the count, so the attempts read 1, 2, 1, 2 and the row
	// before this one says where the count started again.
	AfterRedrive bool
}

// redrives marks, in attempts listed in the order they failed, the first
// attempt of each run a redrive started: only a redrive makes the count
// go back.
func redrives(attempts []operator.AttemptError) []triedAttempt {
	out := make([]triedAttempt, len(attempts))
	for i, a := range attempts {
		out[i] = triedAttempt{AttemptError: a, AfterRedrive: i > 0 && a.Attempt <= attempts[i-1].Attempt}
	}
	return out
}

func (c *Console) getMessage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, http.StatusNotFound, "There is no such message.")
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	m, err := c.opt.Operator.Message(ctx, c.opt.DB, id)
	switch {
	case errors.Is(err, operator.ErrMessageNotFound):
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no message %d (a delivered message is deleted after the retention).", id))
		return
	case err != nil:
		c.internalError(w, r, "look up the message", err)
		return
	}
	v := messageView{StoredMessage: m, PayloadText: prettyJSON(m.Payload), Trace: m.TraceID(), Tried: redrives(m.FailedAttempts)}
	if len(m.Receipt) > 0 {
		v.ReceiptText = prettyJSON(m.Receipt)
	}
	v.TraceLink = c.traceLink(v.Trace)
	for k, val := range m.Headers {
		v.Headers = append(v.Headers, [2]string{k, val})
	}
	slices.SortFunc(v.Headers, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	c.render(w, r, http.StatusOK, "message", map[string]any{"M": v})
}

// prettyJSON indents a stored JSON value; what it cannot parse stays as
// it is.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

func (c *Console) getDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := operator.DeadLetterFilter{Sink: strings.TrimSpace(q.Get("sink")), ErrorContains: q.Get("error"), Limit: deadLettersPerPage}
	if a := q.Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("after: %q is not a cursor (a dead letter's id).", a))
			return
		}
		f.After = n
	}
	ctx, cancel := c.context(r)
	defer cancel()
	if q.Get("group") == "error" {
		groups, err := c.opt.Operator.DeadLetterGroups(ctx, c.opt.DB, f.Sink)
		if err != nil {
			c.internalError(w, r, "group dead letters", err)
			return
		}
		c.render(w, r, http.StatusOK, "deadlettergroups", map[string]any{"Q": q, "Groups": groups, "Sinks": c.sinkNames()})
		return
	}
	letters, err := c.opt.Operator.DeadLetters(ctx, c.opt.DB, f)
	if err != nil {
		c.internalError(w, r, "list dead letters", err)
		return
	}
	data := map[string]any{"Q": q, "Letters": letters, "Sinks": c.sinkNames()}
	if len(letters) == deadLettersPerPage {
		next := cloneValues(q)
		next.Set("after", strconv.FormatInt(letters[len(letters)-1].ID, 10))
		data["Next"] = "/dead-letters?" + next.Encode()
	}
	c.render(w, r, http.StatusOK, "deadletters", data)
}

// pastTense names what an action did, for the log.
var pastTense = map[string]string{"redrive": "redriven", "purge": "purged"}

// selection is what a dead-letter form asks to act on.
type selection struct {
	Action string // redrive or purge
	IDs    []int64
	All    bool
	Sink   string
	Error  string
	// Token is the dry run's, on a confirmation: it acts on exactly the
	// rows counted.
	Token string
}

// selectionOf reads a dead-letter form: do is "<action>-selected" or
// "<action>-matching".
func selectionOf(r *http.Request) (selection, error) {
	var s selection
	action, scope, _ := strings.Cut(r.PostFormValue("do"), "-")
	if action != "redrive" && action != "purge" {
		return s, errors.New("choose redrive or purge")
	}
	s.Action = action
	switch scope {
	case "selected":
		for _, v := range r.PostForm["ids"] {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return s, fmt.Errorf("%q is not a message id", v)
			}
			s.IDs = append(s.IDs, id)
		}
		if len(s.IDs) == 0 {
			return s, errors.New("select at least one dead letter, or act on all that match")
		}
	case "matching":
		s.All, s.Sink, s.Error = true, r.PostFormValue("sink"), r.PostFormValue("error")
	default:
		return s, errors.New("act on the selected dead letters or on all that match")
	}
	if _, ok := r.PostForm["up_to_id"]; ok {
		// A form of an older console: its id bound let the confirmation
		// act on older rows that died after the count.
		return s, errors.New("up_to_id: this form is out of date; count the dead letters again")
	}
	s.Token = r.PostFormValue("token")
	return s, nil
}

// filter is the selection for a dry run, or else for its confirmation.
func (s selection) filter(dryRun bool) operator.RedriveFilter {
	f := operator.RedriveFilter{IDs: s.IDs, All: s.All, Sink: s.Sink, ErrorContains: s.Error, DryRun: dryRun}
	if !dryRun {
		f.Token = s.Token
	}
	return f
}

// run redrives or purges the selection (dryRun: counts it).
func (c *Console) run(r *http.Request, s selection, dryRun bool) (operator.ActionResult, error) {
	ctx, cancel := c.context(r)
	defer cancel()
	actor := auditactor.Of(visitorOf(r).id)
	if s.Action == "purge" {
		return c.opt.Operator.Purge(ctx, c.opt.DB, actor, s.filter(dryRun))
	}
	return c.opt.Operator.Redrive(ctx, c.opt.DB, actor, s.filter(dryRun))
}

// postConfirm counts what a dead-letter action would touch (a dry run) and
// asks for confirmation; nothing changes yet.
func (c *Console) postConfirm(w http.ResponseWriter, r *http.Request) {
	s, err := selectionOf(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	plan, err := c.run(r, s, true)
	if err != nil {
		c.internalError(w, r, s.Action+" (dry run)", err)
		return
	}
	s.Token = plan.Token // the confirmation acts on exactly these rows
	c.render(w, r, http.StatusOK, "confirm", map[string]any{"S": s, "Plan": plan})
}

// postApply does a confirmed dead-letter action.
func (c *Console) postApply(w http.ResponseWriter, r *http.Request) {
	s, err := selectionOf(r)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if r.PostFormValue("confirm") != "yes" || s.Token == "" {
		c.fail(w, r, http.StatusBadRequest, "The action was not confirmed; nothing changed.")
		return
	}
	res, err := c.run(r, s, false)
	switch {
	case errors.Is(err, operator.ErrInvalidToken):
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("token: %q is not the token of a dry run; nothing changed.", s.Token))
		return
	case errors.Is(err, operator.ErrSelectionChanged):
		// Ask again, with the new count and its token.
		s.Token = res.Token
		c.render(w, r, http.StatusConflict, "confirm", map[string]any{"S": s, "Plan": res, "Changed": true})
		return
	case err != nil:
		c.internalError(w, r, s.Action, err)
		return
	}
	c.opt.Logger.Info("console: dead letters "+pastTense[s.Action], "rows", res.Rows, "ids", s.IDs, "all", s.All,
		"sink", s.Sink, "error", s.Error)
	back := url.Values{}
	if s.Sink != "" {
		back.Set("sink", s.Sink)
	}
	if s.Error != "" {
		back.Set("error", s.Error)
	}
	c.render(w, r, http.StatusOK, "done", map[string]any{"S": s, "Res": res, "Back": "/dead-letters?" + back.Encode()})
}

func (c *Console) postPause(w http.ResponseWriter, r *http.Request) {
	var d time.Duration
	if v := strings.TrimSpace(r.PostFormValue("for")); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a duration like 15m or 2h; leave it empty to pause until resumed.", v))
			return
		}
	}
	c.changeSink(w, r, "paused", func(ctx context.Context, actor audit.Actor, sink, by, reason string) error {
		_, err := c.opt.Operator.PauseSink(ctx, c.opt.DB, actor, sink, operator.Pause{For: d, By: by, Reason: reason})
		return err
	})
}

func (c *Console) postResume(w http.ResponseWriter, r *http.Request) {
	c.changeSink(w, r, "resumed", func(ctx context.Context, actor audit.Actor, sink, by, reason string) error {
		res, err := c.opt.Operator.ResumeSink(ctx, c.opt.DB, actor, sink, by, reason)
		res.LogClosed(ctx, c.opt.Logger, by)
		return err
	})
}

// postForget removes the stale pause of a sink that is not configured
// (a typo's, a removed sink's), and goes back to the overview.
func (c *Console) postForget(w http.ResponseWriter, r *http.Request) {
	sink := r.PathValue("name")
	_, configured := c.shown.Load().sinks[sink]
	ctx, cancel := c.context(r)
	defer cancel()
	id := visitorOf(r).id
	_, err := c.opt.Operator.ForgetSink(ctx, c.opt.DB, auditactor.Of(id), sink, configured)
	switch {
	case errors.Is(err, operator.ErrConfiguredSink):
		c.fail(w, r, http.StatusConflict, fmt.Sprintf("%s is configured here: resume it instead.", sink))
		return
	case errors.Is(err, operator.ErrUnknownSink):
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("%s has no recorded pause.", sink))
		return
	case err != nil:
		c.internalError(w, r, "remove the pause", err)
		return
	}
	c.opt.Logger.Info("console: stale pause removed", "sink", sink, "by", id.Name)
	c.overview.invalidate()
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// changeSink pauses or resumes a sink as the signed-in visitor, with why
// (and, without sign-in, who) from the form, and goes back to the
// overview, or to the sink's page the form was on.
func (c *Console) changeSink(w http.ResponseWriter, r *http.Request, done string,
	change func(ctx context.Context, actor audit.Actor, sink, by, reason string) error) {
	sink := r.PathValue("name")
	id := visitorOf(r).id
	by := id.RecordedBy(strings.TrimSpace(r.PostFormValue("by")), "console user")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	ctx, cancel := c.context(r)
	defer cancel()
	if err := change(ctx, auditactor.Of(id), sink, by, reason); err != nil {
		c.internalError(w, r, "change the sink", err)
		return
	}
	c.opt.Logger.Info("console: sink "+done+" by hand", "sink", sink, "by", by, "reason", reason)
	c.overview.invalidate()
	back := "/"
	if r.PostFormValue("back") == backToSink {
		back = "/sinks/" + url.PathEscape(sink)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.fail(w, r, http.StatusNotFound, "There is no such page.")
}

// fail shows an error page with a message for people.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", map[string]any{"Message": msg})
}

// internalError logs err and tells the browser only that it failed; a
// query that ran out of time says so, with 503: trying later may work.
func (c *Console) internalError(w http.ResponseWriter, r *http.Request, op string, err error) {
	c.opt.Logger.ErrorContext(r.Context(), "console: "+op+" failed", "path", r.URL.Path, "error", err)
	if apidb.TimedOut(err) {
		c.fail(w, r, http.StatusServiceUnavailable, "Could not "+op+": "+apidb.Message(c.opt.QueryTimeout)+".")
		return
	}
	c.fail(w, r, http.StatusInternalServerError, "Could not "+op+"; see the server log.")
}

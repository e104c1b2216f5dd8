package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/access"
	"github.com/outboxd/outboxd/server/internal/auditactor"
	"github.com/outboxd/outboxd/server/portal"
)

// The destination pages serve two audiences with the same handlers and
// templates: operators in the console, who see every tenant (named in the
// path) and change destinations with the operate role, and a tenant in
// its portal (portal.go), who sees and changes only its own, the tenant
// always its session's. Every handler takes the tenant from its
// destinationScope and every query it runs is for that tenant.

// Page sizes of the destination pages.
const (
	destinationsPerPage = 50
	deliveriesPerPage   = 20
)

// defaultRotateOverlap is what the rotate form offers: a day for the
// receiver to switch to the new secret while the old one still signs.
const defaultRotateOverlap = "24h"

// destinationScope is who the destination pages act for: a tenant's
// portal session (its tenant only) or an operator looking at Tenant.
type destinationScope struct {
	Portal bool
	Tenant string
	// Minter is who minted the portal link the tenant came with.
	Minter string
}

// Base is the path of the scope's destinations: a destination's page is
// Base/<id>, its actions below it.
func (s destinationScope) Base() string {
	if s.Portal {
		return portal.Path + "/destinations"
	}
	return "/tenants/" + url.PathEscape(s.Tenant) + "/destinations"
}

// List is the path of the first page of the scope's destinations.
func (s destinationScope) List() string { return s.listPage("") }

// listPage is the path of the page of the scope's destinations after
// the id after.
func (s destinationScope) listPage(after string) string {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	path := portal.Path + "/"
	if !s.Portal {
		path = "/destinations"
		if s.Tenant != "" {
			q.Set("tenant", s.Tenant)
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// page is the path of destination id's page.
func (s destinationScope) page(id string) string { return s.Base() + "/" + url.PathEscape(id) }

// actor is who a change in the scope is recorded as: the operator signed
// in, or the tenant through its portal.
func (s destinationScope) actor(r *http.Request) audit.Actor {
	if s.Portal {
		return audit.Actor{Name: portal.ActorName(s.Tenant, s.Minter), Role: portalRole, Source: access.ClientHost(r)}
	}
	return auditactor.Of(visitorOf(r).id)
}

// formURL is the URL d's edit form holds: the tenant in its portal sees
// its own URL as it set it; an operator sees it with its credentials
// redacted, and the form sent back unchanged keeps them
// (destinations.RedactURL).
func (s destinationScope) formURL(d destinations.Destination) string {
	if s.Portal {
		return d.OwnURL()
	}
	return d.URL
}

// destinationHandler is a destination page or action for scope.
type destinationHandler func(w http.ResponseWriter, r *http.Request, scope destinationScope)

// operatorScope runs h for the tenant the path names, for an operator.
func (c *Console) operatorScope(h destinationHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := r.PathValue("tenant")
		if err := destinations.CheckTenant(tenant); err != nil {
			c.fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
		h(w, r, destinationScope{Tenant: tenant})
	}
}

// destinationView is a destination with its fields spelt for the page.
type destinationView struct {
	destinations.Destination
	EventsText, RateText, MetadataText string
	// FilterText is its payload filter, indented.
	FilterText   string
	WaitingCount int64
	// Page is its page's path.
	Page string
	// Form holds its fields as the edit form shows them.
	Form formValues
}

// formValues are the values the create and edit forms show.
type formValues struct {
	URL, Events, Filter, Description, Rate, Metadata string
	// Editing says the form changes a destination: an empty rate limit
	// leaves it as it is.
	Editing bool
	// Portal says the form is a tenant's: its metadata is the operator's
	// to keep, shown but not editable (destination_health.go).
	Portal bool
	// Catalog is the event types the form offers (destination_health.go).
	Catalog []catalogChoice
}

// defaultRateText is what a destination without a rate limit of its own
// shows: an operator reads whose default applies, a tenant that it has
// none of its own.
func defaultRateText(scope destinationScope) string {
	if scope.Portal {
		return "none of its own (the service's default)"
	}
	return "the sink's default"
}

// viewOf spells d for the pages of scope.
func viewOf(d destinations.Destination, scope destinationScope) destinationView {
	own := destinationScope{Portal: scope.Portal, Tenant: d.Tenant}
	v := destinationView{Destination: d, EventsText: strings.Join(d.Events, ", "), RateText: defaultRateText(scope),
		MetadataText: prettyJSON(d.Metadata), FilterText: prettyJSON(d.Filter), Page: own.page(d.ID),
		Form: formValues{URL: scope.formURL(d), Events: strings.Join(d.Events, ", "), Filter: string(d.Filter), Description: d.Description, Metadata: string(d.Metadata), Editing: true, Portal: scope.Portal}}
	if v.EventsText == "" {
		v.EventsText = "every type"
	}
	if d.RateLimit != nil {
		v.Form.Rate = strconv.FormatFloat(*d.RateLimit, 'g', -1, 64)
		v.RateText = v.Form.Rate + " per second"
	}
	if d.Waiting != nil {
		v.WaitingCount = *d.Waiting
	}
	return v
}

// getDestinations lists every tenant's destinations, or one tenant's with
// ?tenant=, a page at a time.
func (c *Console) getDestinations(w http.ResponseWriter, r *http.Request) {
	tenant := strings.TrimSpace(r.URL.Query().Get("tenant"))
	if tenant != "" {
		if err := destinations.CheckTenant(tenant); err != nil {
			c.fail(w, r, http.StatusBadRequest, err.Error())
			return
		}
	}
	c.listDestinations(w, r, destinationScope{Tenant: tenant})
}

// listDestinations shows a page of the scope's destinations (an
// operator's without a tenant: every tenant's) and the form creating one.
func (c *Console) listDestinations(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	after := r.URL.Query().Get("after")
	ctx, cancel := c.context(r)
	defer cancel()
	var (
		page []destinations.Destination
		next string
		err  error
	)
	if scope.Tenant == "" && !scope.Portal {
		page, next, err = c.opt.Destinations.ListAll(ctx, c.opt.DB, after, destinationsPerPage)
	} else {
		page, next, err = c.opt.Destinations.List(ctx, c.opt.DB, scope.Tenant, after, destinationsPerPage)
	}
	if err != nil {
		c.internalError(w, r, "list destinations", err)
		return
	}
	views := make([]destinationView, len(page))
	for i, d := range page {
		views[i] = viewOf(d, scope)
	}
	create := "/destinations"
	if scope.Portal {
		create = scope.Base()
	}
	data := map[string]any{"Scope": scope, "Destinations": views, "CreateAction": create, "Form": formValues{Portal: scope.Portal, Catalog: c.choices(nil)}}
	if next != "" {
		data["Next"] = scope.listPage(next)
	}
	c.render(w, r, http.StatusOK, "destinations", data)
}

// destinationsServed answers, when the console has no destinations store,
// that it serves none, and reports whether it does.
func (c *Console) destinationsServed(w http.ResponseWriter, r *http.Request) bool {
	if c.opt.Destinations == nil {
		c.fail(w, r, http.StatusNotFound, "This console does not manage destinations.")
		return false
	}
	return true
}

// deliveryView is a delivery with its failed attempts decoded.
type deliveryView struct {
	destinations.Delivery
	Failed []operator.AttemptError
}

// showDestination shows a destination, how many of its rows wait, and
// its recent deliveries with every failed attempt, a page at a time.
func (c *Console) showDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	id := r.PathValue("id")
	var before int64
	if b := r.URL.Query().Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("before: %q is not a cursor (a delivery's id).", b))
			return
		}
		before = n
	}
	ctx, cancel := c.context(r)
	defer cancel()
	d, err := c.opt.Destinations.Get(ctx, c.opt.DB, scope.Tenant, id)
	if err != nil {
		c.destinationFailed(w, r, scope, "read the destination", err)
		return
	}
	page, next, err := c.opt.Destinations.Deliveries(ctx, c.opt.DB, scope.Tenant, id, before, deliveriesPerPage)
	if err != nil {
		c.destinationFailed(w, r, scope, "read the deliveries", err)
		return
	}
	if scope.Portal {
		page = destinations.ForTenant(page)
	}
	deliveries := make([]deliveryView, len(page))
	for i, p := range page {
		deliveries[i] = deliveryView{Delivery: p}
		if err := json.Unmarshal(p.FailedAttempts, &deliveries[i].Failed); err != nil {
			c.internalError(w, r, "read the deliveries", fmt.Errorf("the failed attempts of row %d: %w", p.ID, err))
			return
		}
	}
	health, err := c.healthOf(ctx, d)
	if err != nil {
		c.internalError(w, r, "read the destination's health", err)
		return
	}
	view := viewOf(d, scope)
	view.Form.Catalog = c.choices(d.Events)
	shown := c.shown.Load()
	data := map[string]any{"Scope": scope, "D": view, "Self": scope.page(id), "Deliveries": deliveries,
		"Overlap": defaultRotateOverlap, "TestEvents": shown.testEventSink != "", "Health": health,
		"EventTypes": shown.eventTypes, "TestEventType": destinations.TestEventType}
	if next != 0 {
		data["Next"] = scope.page(id) + "?before=" + strconv.FormatInt(next, 10)
	}
	c.render(w, r, http.StatusOK, "destination", data)
}

// destinationFailed answers for err of an action on a destination: 422
// for a value refused, 404 for a destination the scope's tenant does not
// have, 503 without a secrets key.
func (c *Console) destinationFailed(w http.ResponseWriter, r *http.Request, scope destinationScope, op string, err error) {
	var (
		input *destinations.InputError
		quota *destinations.QuotaError
	)
	switch {
	case errors.As(err, &input), errors.As(err, new(*formError)):
		c.fail(w, r, http.StatusUnprocessableEntity, err.Error()+".")
	case errors.As(err, &quota):
		quota.RetryAfterHeader(w.Header())
		c.fail(w, r, quota.HTTPStatus(), quota.Error()+".")
	case errors.Is(err, destinations.ErrNotFound) && scope.Portal:
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("You have no endpoint %s.", r.PathValue("id")))
	case errors.Is(err, destinations.ErrNotFound):
		c.fail(w, r, http.StatusNotFound, fmt.Sprintf("Tenant %s has no destination %s.", scope.Tenant, r.PathValue("id")))
	case errors.Is(err, destinations.ErrNoKeyring):
		c.fail(w, r, http.StatusServiceUnavailable, "Signing secrets cannot be made here: "+destinations.EnvSecretsKey+" is not set.")
	default:
		c.internalError(w, r, op, err)
	}
}

// formError is a form field refused before it reached the store.
type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

// destinationForm is what the create and edit forms hold.
type destinationForm struct {
	url, description string
	events           []string
	// rateLimit is nil when the field is empty.
	rateLimit *float64
	metadata  json.RawMessage
	// filter is {} when the field is empty: no filter (the store checks
	// it, naming the path of what it refuses).
	filter json.RawMessage
}

// readDestinationForm reads the create or edit form: events are patterns
// separated by commas or spaces (none: every type), the rate limit a
// number of deliveries per second (empty: none given), metadata a JSON
// object (empty: {}), the filter a payload filter (empty: none).
func readDestinationForm(r *http.Request) (destinationForm, error) {
	f := destinationForm{url: strings.TrimSpace(r.PostFormValue("url")), description: strings.TrimSpace(r.PostFormValue("description")),
		events:   strings.FieldsFunc(r.PostFormValue("events"), func(c rune) bool { return c == ',' || unicode.IsSpace(c) }),
		metadata: json.RawMessage(strings.TrimSpace(r.PostFormValue("metadata"))),
		filter:   json.RawMessage(strings.TrimSpace(r.PostFormValue("filter")))}
	f.events = withCatalogChoices(r, f.events)
	if len(f.filter) == 0 {
		f.filter = json.RawMessage("{}")
	}
	if v := strings.TrimSpace(r.PostFormValue("rate_limit")); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return f, &formError{fmt.Sprintf("rate limit: %q is not a number of deliveries per second", v)}
		}
		f.rateLimit = &rate
	}
	if len(f.metadata) == 0 {
		f.metadata = json.RawMessage("{}")
	}
	if !json.Valid(f.metadata) {
		return f, &formError{"metadata must be a JSON object, such as {\"plan\": \"pro\"}"}
	}
	return f, nil
}

// postCreateDestination creates a destination of the form's tenant, for
// an operator.
func (c *Console) postCreateDestination(w http.ResponseWriter, r *http.Request) {
	tenant := strings.TrimSpace(r.PostFormValue("tenant"))
	if err := destinations.CheckTenant(tenant); err != nil {
		c.fail(w, r, http.StatusUnprocessableEntity, err.Error()+".")
		return
	}
	c.createDestination(w, r, destinationScope{Tenant: tenant})
}

// createDestination creates a destination of the scope's tenant and shows
// its signing secret, this once.
func (c *Console) createDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	f, err := readDestinationForm(r)
	if err != nil {
		c.destinationFailed(w, r, scope, "create the destination", err)
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	if scope.Portal {
		f.metadata = nil // the operator's to keep: a tenant's endpoint starts with none
	}
	created, err := c.opt.Destinations.Create(ctx, c.opt.DB, scope.actor(r), scope.Tenant, destinations.Spec{URL: f.url, Events: f.events, Filter: f.filter,
		Description: f.description, RateLimit: f.rateLimit, Metadata: f.metadata})
	if err != nil {
		c.destinationFailed(w, r, scope, "create the destination", err)
		return
	}
	c.logChange(r, scope, "created", created.ID)
	c.render(w, r, http.StatusCreated, "destination_done", map[string]any{"Scope": scope, "Self": scope.page(created.ID),
		"Title": "Destination created", "Secret": created.Secret,
		"Said": "Give this signing secret to the receiver now: it verifies each delivery with it. It is not shown again."})
}

// editDestination sets the form's fields on a destination. An empty rate
// limit leaves it as it is.
func (c *Console) editDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	f, err := readDestinationForm(r)
	if err != nil {
		c.destinationFailed(w, r, scope, "change the destination", err)
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	metadata := &f.metadata
	if scope.Portal {
		metadata = nil // the operator's to keep: a tenant's form leaves it as it is
	}
	_, err = c.opt.Destinations.Update(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, destinations.Patch{URL: &f.url, Events: &f.events, Filter: &f.filter,
		Description: &f.description, RateLimit: f.rateLimit, Metadata: metadata})
	if err != nil {
		c.destinationFailed(w, r, scope, "change the destination", err)
		return
	}
	c.logChange(r, scope, "changed", id)
	http.Redirect(w, r, scope.page(id), http.StatusSeeOther)
}

// disableDestination disables a destination with the form's reason: its
// rows wait.
func (c *Console) disableDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		reason = "disabled by " + scope.actor(r).Name
	}
	c.setEnabled(w, r, scope, false, reason)
}

// enableDestination enables a destination: its waiting rows are due.
func (c *Console) enableDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	c.setEnabled(w, r, scope, true, "")
}

func (c *Console) setEnabled(w http.ResponseWriter, r *http.Request, scope destinationScope, enabled bool, reason string) {
	if !c.destinationsServed(w, r) {
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	if _, err := c.opt.Destinations.SetEnabled(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, enabled, reason); err != nil {
		c.destinationFailed(w, r, scope, "enable or disable the destination", err)
		return
	}
	done := "disabled"
	if enabled {
		done = "enabled"
	}
	c.logChange(r, scope, done, id)
	http.Redirect(w, r, scope.page(id), http.StatusSeeOther)
}

// rotateSecret gives a destination a new signing secret, shown this once;
// the old ones sign for the form's overlap.
func (c *Console) rotateSecret(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	var overlap time.Duration
	if v := strings.TrimSpace(r.PostFormValue("overlap")); v != "" {
		var err error
		if overlap, err = time.ParseDuration(v); err != nil {
			c.fail(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("overlap: %q is not a duration like 24h or 30m; leave it empty to stop the old secrets at once.", v))
			return
		}
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	secret, err := c.opt.Destinations.RotateSecret(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, overlap)
	if err != nil {
		c.destinationFailed(w, r, scope, "rotate the secret", err)
		return
	}
	c.logChange(r, scope, "given a new secret", id)
	said := "The old secrets stopped signing at once."
	if overlap > 0 {
		said = "The old secrets keep signing beside it until " + time.Now().Add(overlap).UTC().Format("2006-01-02 15:04:05Z") + "."
	}
	c.render(w, r, http.StatusOK, "destination_done", map[string]any{"Scope": scope, "Self": scope.page(id), "Title": "New signing secret",
		"Secret": secret, "Said": "Give the receiver this secret now; it is not shown again. " + said})
}

// deleteDestination counts what deleting a destination takes and asks
// for confirmation on a page showing the count, whose form carries the
// count's token; confirmed, it deletes the destination with exactly the
// waiting rows counted (destinations.Store.DeleteCounted). When they
// changed since, nothing is deleted and the page asks again with the new
// count: what it showed is what a delete takes, as in the API and the CLI.
func (c *Console) deleteDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	token := r.PostFormValue("token")
	if r.PostFormValue("confirm") != "yes" || token == "" {
		// Not confirmed with a count (a form without a token is not one
		// this page made): count, and ask.
		count, err := c.opt.Destinations.CountDelete(ctx, c.opt.DB, scope.Tenant, id)
		if err != nil {
			c.destinationFailed(w, r, scope, "count what deleting the destination takes", err)
			return
		}
		c.confirmDelete(w, r, scope, http.StatusOK, count)
		return
	}
	done, err := c.opt.Destinations.DeleteCounted(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, token)
	switch {
	case errors.Is(err, destinations.ErrCountChanged):
		c.confirmDelete(w, r, scope, http.StatusConflict, done)
		return
	case errors.Is(err, destinations.ErrInvalidToken):
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("token: %q is not the token of a count; nothing was deleted.", token))
		return
	case err != nil:
		c.destinationFailed(w, r, scope, "delete the destination", err)
		return
	}
	c.logChange(r, scope, "deleted", id, "waiting_rows_deleted", done.Rows)
	c.render(w, r, http.StatusOK, "destination_done", map[string]any{"Scope": scope, "Title": "Destination deleted",
		"Said": fmt.Sprintf("%s is deleted, with its secrets and %d waiting row(s).", id, done.Rows), "Rows": done.Rows})
}

// confirmDelete shows the page asking to delete the destination the path
// names with the rows count counted, its form carrying count's token;
// status 409 says the rows changed since the visitor confirmed.
func (c *Console) confirmDelete(w http.ResponseWriter, r *http.Request, scope destinationScope, status int, count destinations.DeleteCount) {
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	d, err := c.opt.Destinations.Get(ctx, c.opt.DB, scope.Tenant, id)
	if err != nil {
		c.destinationFailed(w, r, scope, "read the destination", err)
		return
	}
	c.render(w, r, status, "destination_delete", map[string]any{"Scope": scope, "D": viewOf(d, scope), "Self": scope.page(id),
		"Count": count, "Changed": status == http.StatusConflict})
}

// sendTestEvent sends a destination a test event through the console's
// destinations sink.
func (c *Console) sendTestEvent(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	et, own, err := c.testEventOf(r)
	through := c.shown.Load().testEventSink
	var sent destinations.TestEvent
	switch {
	case err != nil:
	case own:
		et.Name = destinations.TestEventType
		sent, err = c.opt.Destinations.SendTestEvent(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, through, time.Now())
	default:
		sent, err = c.opt.Destinations.SendExample(ctx, c.opt.DB, scope.actor(r), scope.Tenant, id, through, et, time.Now())
	}
	if err != nil {
		c.destinationFailed(w, r, scope, "send a test event", err)
		return
	}
	c.logChange(r, scope, "sent a test event", id, "message", sent.MessageID, "type", et.Name)
	c.render(w, r, http.StatusOK, "destination_done", map[string]any{"Scope": scope, "Self": scope.page(id), "Title": "Test event sent",
		"Said": fmt.Sprintf("A test event (type %s) is on its way as delivery %d (key %s); it shows among the recent deliveries.",
			et.Name, sent.MessageID, sent.DedupKey), "Message": sent.MessageID})
}

// redriveDestination counts a destination's dead rows (only the form's
// message, when it names one), found through the scope's tenant, and asks
// for confirmation on a page showing the count, whose form carries the
// dry run's token; confirmed, it redrives exactly the rows counted. When
// a counted row changed since, nothing moves and the page asks again with
// the new count, as the dead-letter pages do.
func (c *Console) redriveDestination(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	if !c.destinationsServed(w, r) {
		return
	}
	var message int64
	if v := r.PostFormValue("message"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not a delivery's id.", v))
			return
		}
		message = n
	}
	ctx, cancel := c.context(r)
	defer cancel()
	id := r.PathValue("id")
	ids, err := c.opt.Destinations.DeadRows(ctx, c.opt.DB, scope.Tenant, id, message)
	if err != nil {
		c.destinationFailed(w, r, scope, "find the dead deliveries", err)
		return
	}
	token := r.PostFormValue("token")
	confirmed := r.PostFormValue("confirm") == "yes" && token != ""
	var res operator.ActionResult
	switch {
	case len(ids) > 0:
		res, err = c.opt.Operator.Redrive(ctx, c.opt.DB, scope.actor(r), operator.RedriveFilter{IDs: ids, DryRun: !confirmed, Token: token})
	case confirmed:
		// The form offers to confirm only a count of some rows: they
		// are not dead any more.
		err = operator.ErrSelectionChanged
	}
	switch {
	case errors.Is(err, operator.ErrInvalidToken):
		c.fail(w, r, http.StatusBadRequest, fmt.Sprintf("token: %q is not the token of a dry run; nothing was redriven.", token))
		return
	case errors.Is(err, operator.ErrSelectionChanged), err == nil && !confirmed:
		status := http.StatusOK
		if err != nil {
			status = http.StatusConflict
		}
		c.render(w, r, status, "destination_redrive", map[string]any{"Scope": scope, "ID": id, "Self": scope.page(id),
			"Plan": res, "Message": message, "Changed": err != nil})
		return
	case err != nil:
		c.internalError(w, r, "redrive", err)
		return
	}
	c.logChange(r, scope, "redriven", id, "rows", res.Rows)
	c.render(w, r, http.StatusOK, "destination_done", map[string]any{"Scope": scope, "Self": scope.page(id), "Title": "Dead deliveries redriven",
		"Said": fmt.Sprintf("Redriven: %d. They are delivered again, from their first attempt.", res.Rows),
		"Rows": res.Rows})
}

// logChange logs a change of a destination with who made it.
func (c *Console) logChange(r *http.Request, scope destinationScope, done, id string, attrs ...any) {
	who := scope.actor(r)
	c.opt.Logger.InfoContext(r.Context(), "console: destination "+done,
		append([]any{"tenant", scope.Tenant, "destination", id, "by", who.Name, "role", who.Role, "source", who.Source, "portal", scope.Portal}, attrs...)...)
}

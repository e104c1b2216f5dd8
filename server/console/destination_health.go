package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/outboxd/outboxd/destinations"
)

// A destination's health, its figures of the last 24 hours, and the
// catalog of event types (plugins.yaml's event_types and outboxd's
// operational events) on the destination pages: the subscription form
// offers the catalog, the test event sends one of its types with its
// example, and the portal has a page listing it. Everything here is in
// the tenant's words: no sink, route or setting is named.

// healthView is a destination's health and figures as the page shows
// them.
type healthView struct {
	destinations.Health
	Stats destinations.Stats
	// Said is the state in a sentence: "Healthy", "Failing since ...".
	Said string
}

// healthOf reads d's health and figures.
func (c *Console) healthOf(ctx context.Context, d destinations.Destination) (healthView, error) {
	h, err := c.opt.Destinations.Health(ctx, c.opt.DB, d)
	if err != nil {
		return healthView{}, err
	}
	stats, err := c.opt.Destinations.Stats(ctx, c.opt.DB, d.ID)
	if err != nil {
		return healthView{}, err
	}
	return healthView{Health: h, Stats: stats, Said: healthSaid(h)}, nil
}

// healthSaid says h's state in a sentence.
func healthSaid(h destinations.Health) string {
	when := func(t *time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
	switch {
	case h.State == destinations.HealthFailing && h.Since != nil:
		return "Failing since " + when(h.Since) + ": deliveries are held and retried from time to time"
	case h.State == destinations.HealthPaused && h.Until != nil:
		return "Paused by your endpoint's Retry-After until " + when(h.Until)
	case h.State == destinations.HealthDisabled:
		if h.Reason == "" {
			return "Disabled"
		}
		return "Disabled: " + h.Reason
	}
	return "Healthy"
}

// catalogChoice is an event type of the catalog as the subscription form
// offers it: checked when the destination's patterns name it.
type catalogChoice struct {
	destinations.EventType
	Checked bool
}

// choices is the catalog as a form for a destination subscribed to
// events offers it.
func (c *Console) choices(events []string) []catalogChoice {
	catalog := c.shown.Load().eventTypes
	out := make([]catalogChoice, len(catalog))
	for i, t := range catalog {
		out[i] = catalogChoice{EventType: t, Checked: slices.Contains(events, t.Name)}
	}
	return out
}

// catalogField is the name of the subscription form's catalog checkboxes,
// whose checked types join the patterns typed in the events field.
const catalogField = "event_type"

// withCatalogChoices adds to events the types checked in the form's
// catalog, each once.
func withCatalogChoices(r *http.Request, events []string) []string {
	for _, t := range r.PostForm[catalogField] {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(events, t) {
			events = append(events, t)
		}
	}
	return events
}

// eventTypeView is a catalog entry as the catalog page shows it.
type eventTypeView struct {
	destinations.EventType
	ExampleText, SchemaText string
}

// getEventTypes shows the catalog of event types, with each one's
// example and schema.
func (c *Console) getEventTypes(w http.ResponseWriter, r *http.Request, scope destinationScope) {
	catalog := c.shown.Load().eventTypes
	views := make([]eventTypeView, len(catalog))
	for i, t := range catalog {
		views[i] = eventTypeView{EventType: t, ExampleText: prettyJSON(t.Example), SchemaText: prettyJSON(t.Schema)}
	}
	c.render(w, r, http.StatusOK, "event_types", map[string]any{"Scope": scope, "EventTypes": views})
}

// testEventOf is the test event the form asks for: outboxd's own (no
// type, or destinations.TestEventType), or a catalog type with its
// example; ok is false for a type the catalog does not hold.
func (c *Console) testEventOf(r *http.Request) (et destinations.EventType, own bool, err error) {
	name := strings.TrimSpace(r.PostFormValue("type"))
	if name == "" || name == destinations.TestEventType {
		return et, true, nil
	}
	et, ok := c.shown.Load().eventTypes.Lookup(name)
	if !ok {
		return et, false, &formError{fmt.Sprintf("type: %q is not an event type of the catalog", name)}
	}
	return et, false, nil
}

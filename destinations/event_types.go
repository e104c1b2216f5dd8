package destinations

import (
	"encoding/json"
	"slices"

	"github.com/outboxd/outboxd/core/status"
)

// EventType is one entry of the catalog of event types a tenant may
// subscribe to: declared by the operator in plugins.yaml (event_types:),
// or one of outboxd's own operational events. The portal's subscription
// form offers them, and a test event of a type carries its Example as
// its data.
type EventType struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Example is an example of the event's data, as a receiver gets it.
	Example json.RawMessage `json:"example"`
	// Schema is the JSON Schema of the event's data, when the operator
	// declared one; the Example validates against it.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Operational marks outboxd's own events about the tenant's
	// endpoints (OperationalEventTypes).
	Operational bool `json:"operational,omitempty"`
}

// Catalog is the event types a tenant may subscribe to, in the order the
// operator declared them, outboxd's operational events last.
type Catalog []EventType

// Lookup returns the catalog's event type named name.
func (c Catalog) Lookup(name string) (EventType, bool) {
	i := slices.IndexFunc(c, func(t EventType) bool { return t.Name == name })
	if i < 0 {
		return EventType{}, false
	}
	return c[i], true
}

// The operational events a tenant's destination may subscribe to (a
// pattern such as outboxd.destination.*): sent to the tenant's own
// destinations only, about its own endpoints (docs/destinations.md,
// "Operational events").
const (
	// EventFailing says an endpoint's deliveries fail: outboxd stopped
	// sending to it and tries it now and then (its circuit breaker
	// opened).
	EventFailing = status.EventDestinationFailing
	// EventRecovered says an endpoint that was failing answers again and
	// its deliveries resume.
	EventRecovered = status.EventDestinationRecovered
	// EventDisabled says outboxd disabled an endpoint whose deliveries
	// kept failing: its events wait until it is enabled again.
	EventDisabled = status.EventDestinationDisabled
)

// OperationalEventTypes are outboxd's own events about a tenant's
// endpoints, as the catalog lists them.
func OperationalEventTypes() Catalog {
	example := func(state, reason string) json.RawMessage {
		data := map[string]string{"destination": "dst_kx2m4fq7rj3v5wzp", "description": "Orders endpoint",
			"state": state, "since": "2026-01-02T15:04:05Z"}
		if reason != "" {
			data["reason"] = reason
		}
		b, _ := json.Marshal(data)
		return b
	}
	return Catalog{
		{Name: EventFailing, Operational: true, Example: example(HealthFailing, ""),
			Description: "One of your endpoints is failing: deliveries to it stopped, and outboxd tries it again from time to time."},
		{Name: EventRecovered, Operational: true, Example: example(HealthHealthy, ""),
			Description: "One of your endpoints that was failing answers again: its deliveries resume."},
		{Name: EventDisabled, Operational: true, Example: example(HealthDisabled, status.AutoDisabledForTenant),
			Description: "outboxd disabled one of your endpoints because its deliveries kept failing; its events wait until you enable it."},
	}
}

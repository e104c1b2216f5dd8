package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/server/internal/auditactor"
)

// The catalog of event types a tenant may subscribe to (plugins.yaml's
// event_types and outboxd's operational events), a destination's health
// and figures beside it, and test events of a catalog type.

// EventTypeList is GET /v1/tenants/{tenant}/event-types' answer: the
// catalog, in the order the operator declared it, outboxd's operational
// events last.
type EventTypeList struct {
	EventTypes destinations.Catalog `json:"event_types"`
}

func (s *API) listEventTypes(*http.Request, string) (any, error) {
	return EventTypeList{EventTypes: s.Config.EventTypes()}, nil
}

// DestinationDetail is GET /v1/tenants/{tenant}/destinations/{id}'s
// answer: the destination, its health as its receiver's answers made it,
// and its figures over the last 24 hours.
type DestinationDetail struct {
	destinations.Destination
	Health   destinations.Health `json:"health"`
	Stats24h destinations.Stats  `json:"stats_24h"`
}

func (s *API) showDestination(r *http.Request, tenant string) (any, error) {
	d, err := s.Destinations.Get(r.Context(), s.DB, tenant, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	out := DestinationDetail{Destination: d}
	if out.Health, err = s.Destinations.Health(r.Context(), s.DB, d); err != nil {
		return nil, err
	}
	out.Stats24h, err = s.Destinations.Stats(r.Context(), s.DB, d.ID)
	return out, err
}

// testEventRequest is POST .../test-event's optional body: the catalog's
// event type to send, with its example as data (none: an event of type
// destinations.TestEventType).
type testEventRequest struct {
	Type string `json:"type"`
}

// sendTestEvent enqueues a test event for the destination, through the
// sink the configuration names for test events, within the tenant's quota
// of test events (429 with Retry-After beyond it): of the type the body
// names, carrying its example (422 naming type for a type the catalog
// does not hold), or outboxd's own test event.
func (s *API) sendTestEvent(r *http.Request, tenant string) (any, error) {
	var req testEventRequest
	if err := decodeBody(r, &req, true); err != nil {
		return nil, err
	}
	actor, id, sink := auditactor.Of(identity(r)), r.PathValue("id"), s.Config.TestEventSink()
	if req.Type == "" {
		return s.Destinations.SendTestEvent(r.Context(), s.DB, actor, tenant, id, sink, time.Now())
	}
	et, ok := s.Config.EventTypes().Lookup(req.Type)
	if !ok {
		return nil, &requestError{http.StatusUnprocessableEntity,
			fmt.Errorf("type: %q is not in the catalog of event types (GET /v1/tenants/{tenant}/event-types)", req.Type)}
	}
	return s.Destinations.SendExample(r.Context(), s.DB, actor, tenant, id, sink, et, time.Now())
}

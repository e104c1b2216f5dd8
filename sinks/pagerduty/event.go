package pagerduty

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outboxd/outboxd/core/sink"
)

// The event actions of the Events API v2.
const (
	ActionTrigger     = "trigger"
	ActionAcknowledge = "acknowledge"
	ActionResolve     = "resolve"
)

// The severities PagerDuty accepts in payload.severity.
const (
	SeverityCritical = "critical"
	SeverityError    = "error"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// severities lists the Severity constants, for checks and error messages.
var severities = []string{SeverityCritical, SeverityError, SeverityWarning, SeverityInfo}

func validSeverity(s string) bool { return slices.Contains(severities, s) }

// PagerDuty's documented bounds on an event's fields.
const (
	// MaxSummary is the most characters payload.summary may hold; the sink
	// cuts a longer summary (see [cutSummary]).
	MaxSummary = 1024
	// MaxDedupKey is the most characters dedup_key may hold; a longer key
	// is sent as its hash (see [dedupKey]).
	MaxDedupKey = 255
)

// Payload is the JSON a pagerduty sink delivers: an event without its
// routing key (a sink option) and dedup key (the row's; see the package
// documentation), the payload object's fields at the top. A trigger needs
// Summary; acknowledge and resolve need nothing but EventAction.
type Payload struct {
	// EventAction is trigger (the default), acknowledge or resolve.
	EventAction string `json:"event_action,omitempty"`
	EventPayload
	Links     []Link  `json:"links,omitempty"`
	Images    []Image `json:"images,omitempty"`
	Client    string  `json:"client,omitempty"`
	ClientURL string  `json:"client_url,omitempty"`
}

// Link is a link shown on the alert.
type Link struct {
	Href string `json:"href"`
	Text string `json:"text,omitempty"`
}

// Image is an image shown on the alert.
type Image struct {
	Src  string `json:"src"`
	Href string `json:"href,omitempty"`
	Alt  string `json:"alt,omitempty"`
}

// Event is the body of one Events API v2 request.
type Event struct {
	RoutingKey  string        `json:"routing_key"`
	EventAction string        `json:"event_action"`
	DedupKey    string        `json:"dedup_key"`
	Payload     *EventPayload `json:"payload,omitempty"`
	Links       []Link        `json:"links,omitempty"`
	Images      []Image       `json:"images,omitempty"`
	Client      string        `json:"client,omitempty"`
	ClientURL   string        `json:"client_url,omitempty"`
}

// EventPayload is a trigger's payload object. The sink fills Source and
// Severity from its options when a row leaves them empty.
type EventPayload struct {
	Summary       string          `json:"summary,omitempty"`
	Source        string          `json:"source,omitempty"`
	Severity      string          `json:"severity,omitempty"`
	Timestamp     string          `json:"timestamp,omitempty"`
	Component     string          `json:"component,omitempty"`
	Group         string          `json:"group,omitempty"`
	Class         string          `json:"class,omitempty"`
	CustomDetails json.RawMessage `json:"custom_details,omitempty"`
}

// payloadFields names Payload's fields for the error a payload with
// another field gets.
const payloadFields = `{"event_action", "summary", "source", "severity", "timestamp", "component", "group", "class", "custom_details", "links", "images", "client", "client_url"}`

// event turns a delivery into the event the sink sends. Its errors are
// permanent: retrying the same row cannot help.
func (s *Sink) event(d *sink.Delivery) (Event, error) {
	var p Payload
	dec := json.NewDecoder(bytes.NewReader(d.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Event{}, sink.Permanent(fmt.Errorf("payload: want %s: %w", payloadFields, err))
	}
	key, fromRow := dedupKey(d)
	ev := Event{RoutingKey: string(s.opts.RoutingKey), EventAction: p.EventAction, DedupKey: key}
	switch ev.EventAction {
	case "":
		ev.EventAction = ActionTrigger
	case ActionTrigger:
	case ActionAcknowledge, ActionResolve:
		if !fromRow {
			// The delivery id names no earlier trigger: PagerDuty would
			// accept the event and change nothing.
			return ev, sink.Permanent(fmt.Errorf("payload: event_action %s needs the incident's dedup_key, the row's ordering key or thread key, and the row has neither", ev.EventAction))
		}
		// PagerDuty reads nothing else of an acknowledge or a resolve.
		return ev, nil
	default:
		return ev, sink.Permanent(fmt.Errorf("payload: event_action %q: want %s, %s or %s", p.EventAction, ActionTrigger, ActionAcknowledge, ActionResolve))
	}
	if strings.TrimSpace(p.Summary) == "" {
		return ev, sink.Permanent(errors.New("payload: a trigger needs a summary"))
	}
	ep := p.EventPayload
	ep.Summary = cutSummary(ep.Summary)
	if ep.Source == "" {
		ep.Source = s.opts.Source
	}
	if ep.Severity == "" {
		ep.Severity = s.opts.Severity
	}
	if !validSeverity(ep.Severity) {
		return ev, sink.Permanent(fmt.Errorf("payload: severity %q: want one of %s", ep.Severity, strings.Join(severities, ", ")))
	}
	if ep.Timestamp == "" && !d.CreatedAt.IsZero() {
		// The row's enqueue time: the same on every attempt.
		ep.Timestamp = d.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	ev.Payload, ev.Links, ev.Images, ev.Client, ev.ClientURL = &ep, p.Links, p.Images, p.Client, p.ClientURL
	return ev, nil
}

// dedupKey is the event's dedup_key: the row's ordering key, else its
// thread key, so that the trigger, acknowledge and resolve of one incident
// share it; else the delivery id, which is the same on every attempt.
// fromRow reports whether it came from a key the producer chose. A key
// longer than PagerDuty takes is sent as "sha256:" and its hash's hex,
// the same for every row of the key.
func dedupKey(d *sink.Delivery) (key string, fromRow bool) {
	switch {
	case d.OrderingKey != "":
		key, fromRow = d.OrderingKey, true
	case d.ThreadKey != "":
		key, fromRow = d.ThreadKey, true
	default:
		key = d.DeliveryID()
	}
	if utf8.RuneCountInString(key) > MaxDedupKey {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return key, fromRow
}

// ellipsis ends a summary that was cut.
const ellipsis = "…"

// cutSummary cuts a summary longer than MaxSummary characters to fit,
// ending it with an ellipsis: a page with a cut summary is worth more than
// a page PagerDuty refuses.
func cutSummary(s string) string {
	if utf8.RuneCountInString(s) <= MaxSummary {
		return s
	}
	runes := []rune(s)
	return string(runes[:MaxSummary-utf8.RuneCountInString(ellipsis)]) + ellipsis
}

// The template fields of [Shape] beyond Payload's string fields.
const (
	fieldSummary       = "summary"
	fieldEventAction   = "event_action"
	fieldCustomDetails = "custom_details"
)

// Shape is the payload routes render for PagerDuty: Payload's fields, each
// a text template except custom_details, links and images (JSON). A
// template sets summary or event_action (an acknowledge or a resolve needs
// no summary). A target without a template triggers an incident whose
// summary is the event's type and key and whose custom_details are its
// data.
func Shape() sink.Shape {
	return sink.Shape{
		Fields: map[string]sink.FieldKind{
			fieldEventAction: sink.Text, fieldSummary: sink.Text, "source": sink.Text, "severity": sink.Text,
			"timestamp": sink.Text, "component": sink.Text, "group": sink.Text, "class": sink.Text,
			fieldCustomDetails: sink.JSON, "links": sink.JSON, "images": sink.JSON,
			"client": sink.Text, "client_url": sink.Text,
		},
		OneOf:       []string{fieldSummary, fieldEventAction},
		Untemplated: untemplated,
	}
}

// TemplateShape is [Shape]: the sink implements sink.Shaper.
func (s *Sink) TemplateShape() sink.Shape { return Shape() }

// untemplated is the payload of a target without a template: a trigger
// summarised by the event's type and key, its data as custom_details.
func untemplated(ev sink.Event) (json.RawMessage, error) {
	p := Payload{EventPayload: EventPayload{Summary: strings.TrimSpace(ev.Type + " " + ev.Key), CustomDetails: ev.Data}}
	if !ev.CreatedAt.IsZero() {
		p.Timestamp = ev.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	return json.Marshal(p)
}

package sink

import (
	"encoding/json"
	"time"
)

// Shapes: what a sink's payload looks like to the templates of routes (see
// package routing). A sink that declares none takes any field as Text, or
// FieldBody as its whole payload.

// FieldKind says how a template field is rendered and where its result
// goes in the sink's payload.
type FieldKind int

const (
	// Text is rendered with text/template into a string field.
	Text FieldKind = iota
	// JSON is rendered with text/template, must produce a JSON array
	// (Block Kit blocks, say), and is placed in the payload as JSON.
	JSON
	// HTML is rendered with html/template, which escapes what it inserts,
	// into a string field.
	HTML
	// List is rendered with text/template into a comma-separated list,
	// placed as a list of strings (mail recipients).
	List
	// Body is rendered with text/template, must produce JSON, and is the
	// whole payload (a webhook's body); it takes no other field beside it.
	Body
)

// FieldBody is the field name of a [Body] in the shape of sinks that do
// not declare one (custom sinks): their template either names string
// fields or gives the whole body.
const FieldBody = "body"

// Shape is what a sink type's payload looks like to templates. A sink
// declares it by implementing [Shaper]; a sink that does not (a custom
// sink) takes any field as Text, or FieldBody as its whole payload, and
// receives the event itself when its target has no template.
type Shape struct {
	// Fields are the template fields the payload has.
	Fields map[string]FieldKind
	// OneOf lists fields of which a template must set at least one; empty
	// means a target may go without a template.
	OneOf []string
	// Threads says the sink replies in threads (sink.Delivery.ThreadRoot),
	// so a target may ask for update_root.
	Threads bool
	// Tenants says the sink delivers to the destinations of a tenant
	// (the sink type destinations): its targets name the tenant with a
	// tenant template, and publish makes one row per destination.
	Tenants bool
	// Untemplated is the payload of a target without a template; nil means
	// the event itself, {"type", "key", "data"}.
	Untemplated func(Event) (json.RawMessage, error)
}

// Shaper is implemented by sinks that declare their payload's [Shape].
type Shaper interface {
	TemplateShape() Shape
}

// Event is an event as templates see it: .type, .key, .data and
// .created_at (when it was published, on the database clock).
type Event struct {
	Type      string          `json:"type"`
	Key       string          `json:"key"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"-"`
}

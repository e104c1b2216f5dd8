package routing

import (
	"encoding/json"

	"github.com/outboxd/outboxd/core/sink"
)

// Reached is one target an event reaches, with the payload its sink would
// be given: what `outboxd routes test` prints.
type Reached struct {
	Route string `json:"route"`
	Sink  string `json:"sink"`
	// Payload is the target's template rendered with the event (or, for a
	// target without one, what its sink gets instead); nil when rendering
	// failed.
	Payload json.RawMessage `json:"payload"`
	// Error is why rendering failed, which would dead-letter the row at
	// delivery; "" when it did not.
	Error string `json:"error,omitempty"`
}

// Route returns the targets an event reaches, in the order publish()
// creates their rows, each with its payload rendered as the relay would
// render it. Nothing is stored: the table is this configuration's, which
// may differ from the routes applied to the database (Versions.Active). An
// event type publish() would refuse is an error.
func (t *Table) Route(ev sink.Event) ([]Reached, error) {
	if err := checkEventType(ev.Type); err != nil {
		return nil, err
	}
	reached := []Reached{}
	for _, r := range t.routes {
		if r.matcher == nil || !r.matcher.Match(ev.Type) {
			continue
		}
		for _, tg := range r.targets {
			out := Reached{Route: r.name, Sink: tg.sink}
			payload, err := tg.compiled.render(ev)
			if err != nil {
				out.Error = err.Error()
			} else {
				out.Payload = payload
			}
			reached = append(reached, out)
		}
	}
	return reached, nil
}

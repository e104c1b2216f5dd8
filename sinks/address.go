package sinks

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"

	"github.com/outboxd/outboxd/core/sink"
)

// AddressData is what an address template (a NATS subject, a RabbitMQ
// routing key, a Kafka topic: where in its broker a sink publishes a
// message) sees of the message it routes:
//
//	{{.Sink}}         the sink instance's name
//	{{.OrderingKey}}  the ordering key, empty for an unordered message
//	{{.DedupKey}}     the dedup key
//	{{.Headers.x}}    the value of the message header x (index .Headers "x-y" for other names)
//
// Go's template built-ins apply: {{or .OrderingKey "unordered"}} gives a
// fallback for messages without an ordering key.
type AddressData struct {
	Sink        string
	OrderingKey string
	DedupKey    string
	Headers     map[string]string
}

// Address is a parsed address template. One without actions is used as
// it is, without running the template engine per message.
type Address struct {
	text string
	tmpl *template.Template // nil when text has no actions
}

// ParseAddress parses an address template (see [AddressData]).
// A reference to a field that does not exist is an error now; a header
// that a message lacks renders as an error when that message is routed.
func ParseAddress(text string) (Address, error) {
	if text == "" {
		return Address{}, errors.New("is required")
	}
	if !strings.Contains(text, "{{") {
		return Address{text: text}, nil
	}
	tmpl, err := template.New("address").Option("missingkey=error").Parse(text)
	if err != nil {
		return Address{}, fmt.Errorf("not a valid template: %w", err)
	}
	// A dry run catches misspelt fields ({{.Ordering}}) at start-up rather
	// than on the first message. Missing header keys are expected here, so
	// the dry run's copy renders them empty instead of failing.
	dry, err := tmpl.Clone()
	if err != nil {
		return Address{}, fmt.Errorf("not a valid template: %w", err)
	}
	if err := dry.Option("missingkey=zero").Execute(io.Discard, AddressData{Headers: map[string]string{}}); err != nil {
		return Address{}, fmt.Errorf("not a valid template: %w", err)
	}
	return Address{text: text, tmpl: tmpl}, nil
}

// Render returns the address of d for the sink instance named sink.
// An error means the message cannot be routed: it is permanent.
func (t Address) Render(sink string, d *sink.Delivery) (string, error) {
	if t.tmpl == nil {
		return t.text, nil
	}
	headers := d.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	out, err := t.render(AddressData{Sink: sink, OrderingKey: d.OrderingKey, DedupKey: d.DedupKey, Headers: headers})
	if err != nil {
		return "", fmt.Errorf("address template %q: %w", t.text, err)
	}
	return out, nil
}

func (t Address) render(data AddressData) (string, error) {
	var b strings.Builder
	err := t.tmpl.Execute(&b, data)
	return b.String(), err
}

// String returns the template's text.
func (t Address) String() string { return t.text }

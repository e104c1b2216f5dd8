// Package jsonl is the one strict decoder of the JSON that producers hand
// the command line and the HTTP API: the bodies of POST /v1/messages and
// /v1/events, and the lines of `outboxd enqueue --file` and `outboxd
// publish --file`. Each value is exactly one JSON object with no unknown
// field and nothing after it, so a typo or a concatenation is refused
// instead of half read.
package jsonl

import (
	"encoding/json"
	"errors"
	"io"

	"github.com/outboxd/outboxd"
)

// ErrTrailingData says a JSON object was followed by more than whitespace.
var ErrTrailingData = errors.New("trailing data after the JSON object")

// Decode decodes exactly one JSON value from r into v: unknown fields are
// errors, and so is anything but whitespace after the value ({...} xyz,
// {...} }, {...}{...}), which a plain Decode would leave unread and the
// caller would silently ignore.
func Decode(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	_, err := dec.Token()
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil || errors.As(err, &syntax):
		return ErrTrailingData
	}
	return err // reading failed: a body over its limit, a broken connection
}

// Message is a message as POST /v1/messages and `outboxd enqueue --file`
// lines carry it.
type Message struct {
	Sink        string          `json:"sink"`
	DedupKey    string          `json:"dedup_key"`
	Payload     json.RawMessage `json:"payload"`
	OrderingKey string          `json:"ordering_key"`
}

// Message returns m as core enqueues it.
func (m Message) Message() outboxd.Message {
	return outboxd.Message{Sink: m.Sink, DedupKey: m.DedupKey, Payload: m.Payload, OrderingKey: m.OrderingKey}
}

// Event is an event as POST /v1/events and `outboxd publish --file` lines
// carry it.
type Event struct {
	Type        string          `json:"type"`
	Key         string          `json:"key"`
	Data        json.RawMessage `json:"data"`
	OrderingKey string          `json:"ordering_key"`
	ThreadKey   string          `json:"thread_key"`
}

// Event returns e as core publishes it.
func (e Event) Event() outboxd.Event {
	return outboxd.Event{Type: e.Type, Key: e.Key, Data: e.Data, OrderingKey: e.OrderingKey, ThreadKey: e.ThreadKey}
}

// Check reports a missing field; everything else is publish()'s to judge.
func (e Event) Check() error {
	switch {
	case e.Type == "":
		return errors.New("type: is required")
	case e.Key == "":
		return errors.New("key: is required")
	case len(e.Data) == 0 || string(e.Data) == "null":
		return errors.New("data: is required (a JSON object; {} for none)")
	}
	return nil
}

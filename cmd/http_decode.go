package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/outboxd/outboxd/core"
)

// messageRequest is the body of POST /v1/messages.
type messageRequest struct {
	Sink        string          `json:"sink"`
	DedupKey    string          `json:"dedup_key"`
	Payload     json.RawMessage `json:"payload"`
	OrderingKey string          `json:"ordering_key"`
}

func (m messageRequest) message() core.Message {
	return core.Message{Sink: m.Sink, DedupKey: m.DedupKey, Payload: m.Payload, OrderingKey: m.OrderingKey}
}

// decodeMessageRequest reads and checks a POST /v1/messages body. It
// returns the HTTP status to answer with on error: 400 for a body that is
// not the expected JSON, 413 for one over MaxRequestBodyBytes, 422 for a
// well-formed request with a missing or unknown field value.
func decodeMessageRequest(body io.Reader, cfg *Config) (messageRequest, int, error) {
	var req messageRequest
	if status, err := decodeStrict(body, &req); err != nil {
		return req, status, err
	}
	switch {
	case req.Sink == "":
		return req, http.StatusUnprocessableEntity, errors.New("sink: is required")
	case req.DedupKey == "":
		return req, http.StatusUnprocessableEntity, errors.New("dedup_key: is required")
	case len(req.Payload) == 0 || string(req.Payload) == "null":
		return req, http.StatusUnprocessableEntity, errors.New("payload: is required")
	}
	if err := checkSink(cfg, req.Sink); err != nil {
		return req, http.StatusUnprocessableEntity, fmt.Errorf("sink: %w", errors.Unwrap(err))
	}
	return req, 0, nil
}

// decodeStrict decodes exactly one JSON object into v, rejecting unknown
// fields, wrong types (naming the field) and trailing data.
func decodeStrict(body io.Reader, v any) (int, error) {
	err := decodeOne(body, v)
	if err == nil {
		return 0, nil
	}
	var (
		tooLarge *http.MaxBytesError
		typeErr  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body is over the limit of %d bytes", tooLarge.Limit)
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return http.StatusBadRequest, fmt.Errorf("%s: want a JSON %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.Is(err, io.EOF):
		return http.StatusBadRequest, errors.New("request body is empty; want a JSON object")
	case errors.Is(err, errTrailingData):
		return http.StatusBadRequest, err
	}
	return http.StatusBadRequest, fmt.Errorf("request body is not the expected JSON object: %w", err)
}

// eventRequest is an event as the HTTP API (POST /v1/events) and
// `outboxd publish --file` lines carry it.
type eventRequest struct {
	Type        string          `json:"type"`
	Key         string          `json:"key"`
	Data        json.RawMessage `json:"data"`
	OrderingKey string          `json:"ordering_key"`
	ThreadKey   string          `json:"thread_key"`
}

func (e eventRequest) event() core.Event {
	return core.Event{Type: e.Type, Key: e.Key, Data: e.Data, OrderingKey: e.OrderingKey, ThreadKey: e.ThreadKey}
}

// check reports a missing field; everything else is publish()'s to judge.
func (e eventRequest) check() error {
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

// decodeEventRequest reads and checks a POST /v1/events body, answering
// the HTTP status as decodeMessageRequest does.
func decodeEventRequest(body io.Reader) (eventRequest, int, error) {
	var req eventRequest
	if status, err := decodeStrict(body, &req); err != nil {
		return req, status, err
	}
	if err := req.check(); err != nil {
		return req, http.StatusUnprocessableEntity, err
	}
	return req, 0, nil
}

package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/outboxd/outboxd/config"
	"github.com/outboxd/outboxd/server/jsonl"
)

// messageRequest is a POST /v1/messages body: a message, addressed to
// one destination (docs/destinations.md) when Destination is set.
type messageRequest struct {
	jsonl.Message
	// Destination is the id of a tenant's destination the message is for
	// (enqueue_destination()); Sink must then be of type destinations.
	Destination string `json:"destination"`
}

// decodeMessageRequest reads and checks a POST /v1/messages body. It
// returns the HTTP status to answer with on error: 400 for a body that is
// not the expected JSON, 413 for one over MaxRequestBodyBytes, 422 for a
// well-formed request with a missing or unknown field value.
func decodeMessageRequest(body io.Reader, cfg *config.Config) (messageRequest, int, error) {
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
	if err := cfg.CheckSink(req.Sink); err != nil {
		return req, http.StatusUnprocessableEntity, fmt.Errorf("sink: %w", err)
	}
	if req.Destination != "" {
		if err := cfg.CheckDestinationSink(req.Sink); err != nil {
			return req, http.StatusUnprocessableEntity, fmt.Errorf("sink: %w", err)
		}
	}
	return req, 0, nil
}

// decodeStrict decodes exactly one JSON object into v, rejecting unknown
// fields, wrong types (naming the field) and trailing data.
func decodeStrict(body io.Reader, v any) (int, error) {
	err := jsonl.Decode(body, v)
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
	case errors.Is(err, jsonl.ErrTrailingData):
		return http.StatusBadRequest, err
	}
	return http.StatusBadRequest, fmt.Errorf("request body is not the expected JSON object: %w", err)
}

// decodeEventRequest reads and checks a POST /v1/events body, answering
// the HTTP status as decodeMessageRequest does.
func decodeEventRequest(body io.Reader) (jsonl.Event, int, error) {
	var req jsonl.Event
	if status, err := decodeStrict(body, &req); err != nil {
		return req, status, err
	}
	if err := req.Check(); err != nil {
		return req, http.StatusUnprocessableEntity, err
	}
	return req, 0, nil
}

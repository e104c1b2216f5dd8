package tracing

import (
	"encoding/json"
	"fmt"
	"io"
)

// Trace is one trace as Jaeger's HTTP API (/api/traces) returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
}

// Span is one span of a Trace. Jaeger turns OpenTelemetry attributes,
// span kind and status into tags (span.kind, otel.status_code, error).
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	Tags          []Tag       `json:"tags"`
	ProcessID     string      `json:"processID"`
}

// Reference ties a span to another: CHILD_OF for its parent, FOLLOWS_FROM
// for a span link.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Tag is one key/value of a span; Value is a string, json.Number or bool.
type Tag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Process is the emitting service of spans.
type Process struct {
	ServiceName string `json:"serviceName"`
}

// DecodeTraces reads the body of a /api/traces response.
func DecodeTraces(r io.Reader) ([]Trace, error) {
	var body struct {
		Data   []Trace `json:"data"`
		Errors []struct {
			Msg string `json:"msg"`
		} `json:"errors"`
	}
	dec := json.NewDecoder(r)
	dec.UseNumber() // integers stay exact: an int64 row id is not a float
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("jaeger: decode traces: %w", err)
	}
	if len(body.Errors) > 0 {
		return nil, fmt.Errorf("jaeger: %s", body.Errors[0].Msg)
	}
	return body.Data, nil
}

// Named returns the spans called name.
func (tr Trace) Named(name string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent (CHILD_OF reference) is parent.
func (tr Trace) Children(parent Span) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.Parent() == parent.SpanID {
			out = append(out, s)
		}
	}
	return out
}

// Parent returns the id of the span's parent, "" for a root.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag returns the value of the tag key as text ("" when absent), so
// strings, numbers and booleans compare alike: "retry", "2", "true".
func (s Span) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/registry"
)

// FileSinkType is the sink type, "file" in plugins.yaml: registry.Define
// decodes its options into fileOptions, refusing unknown options with a
// suggestion and values of the wrong type, naming the option, documents
// them for `outboxd config show`, and hands them to newFileSink with the
// sink's environment.
var FileSinkType = registry.Define("file", "Appends each message to a JSON lines file", fileOptions{}, newFileSink)

// fileOptions are the sink's options in plugins.yaml, declared as package
// confschema describes.
type fileOptions struct {
	// Path is the JSON lines file messages are appended to.
	Path string `mapstructure:"path" defaultdoc:"required" doc:"the JSON lines file messages are appended to"`
}

// Record is one line of the file.
type Record struct {
	ID       int64           `json:"id"`
	Sink     string          `json:"sink"`
	DedupKey string          `json:"dedup_key"`
	Attempt  int             `json:"attempt"`
	Payload  json.RawMessage `json:"payload"`
}

// FileSink appends each delivered message to a file as one JSON line.
type FileSink struct {
	path string
	mu   sync.Mutex // one line at a time: deliveries run concurrently
}

// newFileSink builds the sink from its decoded options, checking what
// decoding cannot: a missing option is an error naming it. It needs
// nothing of its environment (a logger, tracer and meter providers, the
// resources the host shares), and does no I/O: `config check` builds
// every sink.
func newFileSink(_ string, o fileOptions, _ sink.Env) (*FileSink, error) {
	if o.Path == "" {
		return nil, errors.New("option path: is required")
	}
	return &FileSink{path: o.Path}, nil
}

// Deliver appends the message. A file that cannot be opened is retried
// (the disk may come back); a payload that cannot be encoded never will be.
func (s *FileSink) Deliver(ctx context.Context, d *sink.Delivery) error {
	line, err := json.Marshal(Record{ID: d.ID, Sink: d.Sink, DedupKey: d.DedupKey, Attempt: d.Attempt, Payload: d.Payload})
	if err != nil {
		return sink.Permanent(fmt.Errorf("encode message %d: %w", d.ID, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", s.path, err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return fmt.Errorf("append to %s: %w", s.path, err)
	}
	return f.Close()
}

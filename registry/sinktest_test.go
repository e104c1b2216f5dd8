package registry_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/registry"
)

// The log sink keeps the sink contract (package sinktest); its
// destination is its logger, which never fails: every message it accepts
// is one record, named by its sink and dedup key.
func TestLogKeepsTheSinkContract(t *testing.T) {
	var (
		mu  sync.Mutex
		out bytes.Buffer
	)
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &out}, nil))
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return build(t, registry.Log, sink.Env{Logger: logger}) },
		Received: func(t testing.TB) []string {
			mu.Lock()
			defer mu.Unlock()
			var ids []string
			for sc := bufio.NewScanner(bytes.NewReader(out.Bytes())); sc.Scan(); {
				var record struct {
					Sink     string `json:"sink"`
					DedupKey string `json:"dedup_key"`
				}
				if err := json.Unmarshal(sc.Bytes(), &record); err != nil {
					t.Fatalf("log record %s: %v", sc.Bytes(), err)
				}
				ids = append(ids, record.Sink+"/"+record.DedupKey)
			}
			return ids
		},
	})
}

// The discard sink keeps the sink contract: it accepts everything.
func TestDiscardKeepsTheSinkContract(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return build(t, registry.Discard, sink.Env{}) },
	})
}

// build makes a sink of type typ, called sinktest.SinkName, in env.
func build(t testing.TB, typ registry.Type, env sink.Env) sink.Sink {
	t.Helper()
	s, err := typ.New(sinktest.SinkName, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lockedWriter writes to w under mu: the log sink may be called
// concurrently, and the test reads what it wrote.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

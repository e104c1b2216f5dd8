package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
)

// The file sink keeps the sink contract: package sinktest checks what a
// custom sink's test would otherwise write by hand. Its destination is
// the file; a file in a directory that is not there fails for now, a
// payload that is not JSON for good. A file neither asks for a wait nor
// hangs, so those checks are skipped.
func TestFileSinkKeepsTheSinkContract(t *testing.T) {
	archive := filepath.Join(t.TempDir(), "archive.jsonl")
	to := func(t testing.TB, path string) sink.Sink {
		t.Helper()
		s, err := FileSinkType.New(sinktest.SinkName, map[string]any{"path": path}, sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, archive) },
		Received: func(t testing.TB) []string {
			data, err := os.ReadFile(archive)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			var ids []string
			for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
				var r Record
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("line %s: %v", sc.Bytes(), err)
				}
				ids = append(ids, (&sink.Delivery{Sink: r.Sink, DedupKey: r.DedupKey}).DeliveryID())
			}
			return ids
		},
		Retryable: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: to(t, filepath.Join(t.TempDir(), "gone", "archive.jsonl"))}
		},
		Permanent: func(testing.TB) sinktest.Case {
			return sinktest.Case{Alter: func(d *sink.Delivery) { d.Payload = []byte(`{"unterminated":`) }}
		},
	})
}

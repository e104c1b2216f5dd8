package e2e_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Stored text a receiver or a producer could have written: a window-title
// and a clear-screen sequence, a carriage return that hides what came
// before it, a C1 CSI, a right-to-left override, a bell.
const (
	hostileSink  = "evil\x1b]0;pwned\x07sink"
	hostileKey   = "invoice-\u202egpj.exe"
	hostileError = "HTTP 500 Oops\x1b[2J\rall good \u009b31mred\u2066"
)

// terminalControls are characters that must never reach a terminal raw.
var terminalControls = []string{"\x1b", "\r", "\x07", "\u009b", "\u202e", "\u2066"}

// TestTerminalOutputNeutralisesStoredText: dlq list and stats print stored
// text (sink names, dedup keys, receivers' errors) with control, escape
// and bidirectional characters shown as escapes, in their tables and in
// their JSON, whose strings still decode to the stored text; error
// messages show outside text escaped too.
// (Mutations: terminalText returning its input, terminalJSON returning its
// input, and Execute printing errors without terminalText each fail this
// test.)
func TestTerminalOutputNeutralisesStoredText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  audit:\n    type: discard\n", "")
	e.mustRun("migrate")
	ctx := context.Background()
	var id int64
	if err := e.pool.QueryRow(ctx, "INSERT INTO "+e.schema+".messages (sink, dedup_key, payload, status, attempts, last_error) "+
		"VALUES ($1, $2, '{}', 'dead', 1, $3) RETURNING id", hostileSink, hostileKey, hostileError).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "INSERT INTO "+e.schema+".failed_attempts (message_id, attempt, error) VALUES ($1, 1, $2)", id, hostileError); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"dlq", "list"}, {"stats"}, {"dlq", "list", "--json"}, {"stats", "--json"}} {
		out := e.mustRun(args...)
		for _, c := range terminalControls {
			if strings.Contains(out, c) {
				t.Errorf("outboxd %s printed %q raw:\n%s", strings.Join(args, " "), c, out)
			}
		}
		if args[len(args)-1] != "--json" && !strings.Contains(out, `evil\x1b]0;pwned\asink`) {
			t.Errorf("outboxd %s does not show the sink name escaped:\n%s", strings.Join(args, " "), out)
		}
	}
	table := e.mustRun("dlq", "list")
	for _, want := range []string{`invoice-\u202egpj.exe`, `Oops\x1b[2J\rall good \u009b31mred\u2066`} {
		if !strings.Contains(table, want) {
			t.Errorf("dlq list does not show %s:\n%s", want, table)
		}
	}
	// An error message quoting outside text as it was given: the name of a
	// file that does not exist.
	missing := filepath.Join(t.TempDir(), "lines\x1b]0;pwned\x07\r\u202e.jsonl")
	if _, stderr, code := e.run(nil, "enqueue", "--file", missing); code != 2 || !strings.Contains(stderr, `lines\x1b]0;pwned\a\r\u202e.jsonl`) {
		t.Errorf("enqueue --file with a hostile file name: exit %d, stderr %q; want 2 showing the name escaped", code, stderr)
	} else {
		for _, c := range terminalControls {
			if strings.Contains(stderr, c) {
				t.Errorf("an error message printed %q raw: %q", c, stderr)
			}
		}
	}
	var letters []struct {
		Sink      string `json:"sink"`
		DedupKey  string `json:"dedup_key"`
		LastError string `json:"last_error"`
		Errors    []struct {
			Error string `json:"error"`
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("dlq", "list", "--json")), &letters); err != nil {
		t.Fatal(err)
	}
	if len(letters) != 1 || letters[0].Sink != hostileSink || letters[0].DedupKey != hostileKey ||
		letters[0].LastError != hostileError || len(letters[0].Errors) != 1 || letters[0].Errors[0].Error != hostileError {
		t.Errorf("dlq list --json does not decode to the stored text: %+v", letters)
	}
}

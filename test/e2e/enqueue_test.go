package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnqueueRefusesUnstorableInput: a payload PostgreSQL cannot store in
// jsonb (\u0000, a lone surrogate) exits 2 from --payload; in a --file it
// exits 2 naming the line, and nothing of the file is stored, even when
// the bad line comes after several batches' worth of good ones, from a
// file or from stdin. Trailing data after a line's JSON object and an
// unknown sink are such bad lines too.
// (Mutation: enqueue --file skipping its checking pass fails this test.)
func TestEnqueueRefusesUnstorableInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "  bulk:\n    type: discard\n", "")
	e.mustRun("migrate")

	for _, payload := range []string{`{"note":"\u0000"}`, `{"note":"\ud800"}`} {
		_, stderr, code := e.run(nil, "enqueue", "--sink", "bulk", "--key", "one", "--payload", payload)
		if code != 2 || !strings.Contains(stderr, "payload: ") {
			t.Errorf("enqueue --payload %s: exit %d, %q; want 2 naming the payload", payload, code, stderr)
		}
	}

	good := func(from, to int) string {
		var b strings.Builder
		for i := from; i < to; i++ {
			fmt.Fprintf(&b, `{"sink":"bulk","dedup_key":"k-%d","payload":{"i":%d}}`+"\n", i, i)
		}
		return b.String()
	}
	const many = 1200 // more than two batches of EnqueueFileBatchSize
	bad := []struct {
		name, lines, want string
		line              int
	}{
		{"NUL after two good lines", good(0, 2) + `{"sink":"bulk","dedup_key":"x","payload":{"a":"\u0000"}}` + "\n", "payload: ", 3},
		{"lone surrogate after many", good(0, many) + "\n" + `{"sink":"bulk","dedup_key":"x","payload":["\udc00"]}` + "\n" + good(many, many+5), "payload: ", many + 2},
		{"unknown sink after many", good(0, many) + `{"sink":"nope","dedup_key":"x","payload":1}` + "\n", `unknown sink "nope"`, many + 1},
		{"trailing garbage", good(0, 1) + `{"sink":"bulk","dedup_key":"x","payload":1} xyz` + "\n", "trailing data", 2},
		{"trailing brace", good(0, 1) + `{"sink":"bulk","dedup_key":"x","payload":1}}` + "\n", "trailing data", 2},
		{"second object", `{"sink":"bulk","dedup_key":"x","payload":1}{"sink":"bulk","dedup_key":"y","payload":2}` + "\n", "trailing data", 1},
	}
	for _, tt := range bad {
		file := filepath.Join(t.TempDir(), "lines.jsonl")
		if err := os.WriteFile(file, []byte(tt.lines), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, input := range []string{file, "-"} {
			out, stderr, code := e.run(strings.NewReader(tt.lines), "enqueue", "--file", input)
			if code != 2 || !strings.Contains(stderr, fmt.Sprintf("line %d:", tt.line)) || !strings.Contains(stderr, tt.want) ||
				!strings.Contains(stderr, "nothing was enqueued") {
				t.Errorf("%s, --file %s: exit %d, stdout %q, stderr %q; want 2 naming line %d and %q", tt.name, input, code, out, stderr, tt.line, tt.want)
			}
			if rows := e.rowCount(); rows != 0 {
				t.Fatalf("%s, --file %s: %d rows stored from a file with a bad line", tt.name, input, rows)
			}
		}
	}

	out, stderr, code := e.run(strings.NewReader(good(0, many)), "enqueue", "--file", "-")
	if code != 0 || out != fmt.Sprintf("created %d, duplicate 0\n", many) || e.rowCount() != many {
		t.Fatalf("a good file on stdin: exit %d, %q %q, %d rows", code, out, stderr, e.rowCount())
	}
}

// rowCount is the number of rows in the env's outbox.
func (e *env) rowCount() int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+e.schema+".messages_all").Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

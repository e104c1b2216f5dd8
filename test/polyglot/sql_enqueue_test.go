package polyglot_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/proc"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// wokenWithin is how soon after a commit a woken relay must have delivered:
// far below the 10 s poll interval of these tests, so only the wake-up can
// make it. (Typically a few milliseconds; the margin absorbs a loaded CI.)
const wokenWithin = time.Second

// awaitWoken waits for the delivery of id and fails the test unless it came
// within wokenWithin of committed, the moment the producer's process
// returned from its commit (negative when the delivery beat the process's
// own exit).
func (r *receiver) awaitWoken(t *testing.T, id string, committed time.Time) arrival {
	t.Helper()
	got := r.await(t, id)
	latency := got.at.Sub(committed)
	t.Logf("%s delivered %s after the producer's commit returned", id, latency)
	if latency > wokenWithin {
		t.Fatalf("%s delivered %s after the commit, want within %s (the relay polls every 10 s: was it woken?)", id, latency, wokenWithin)
	}
	return got
}

// psql runs script through psql against the test database and returns its
// output and exit code.
func psql(t *testing.T, script string) (string, int) {
	t.Helper()
	cmd := exec.Command(proc.RequireTool(t, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", testdb.URL())
	cmd.Stdin = strings.NewReader("\\set VERBOSITY verbose\n" + script)
	return combinedOutput(t, cmd)
}

// combinedOutput runs cmd to completion and returns its output and exit
// code; it fails the test only when cmd cannot run at all.
func combinedOutput(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// TestPsqlEnqueueIsDeliveredOnCommitOnly calls <schema>.enqueue() from psql
// inside transactions against `outboxd serve` polling every 10 s: the
// committed message is delivered within wokenWithin of the commit (the
// relay was woken), the rolled-back one never, and bad input fails with
// SQLSTATE 22023 and the reason.
// (Mutation: the SQL function not calling wake() fails this test.)
func TestPsqlEnqueueIsDeliveredOnCommitOnly(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	o := newOutbox(t, webhookSink("hook", rcv.URL, ""))
	o.serve(t)

	if out, code := psql(t, fmt.Sprintf(`BEGIN;
SELECT * FROM %s.enqueue('hook', 'psql-rolled-back', '{"from": "psql"}');
ROLLBACK;`, o.schema)); code != 0 {
		t.Fatalf("psql rollback: exit %d\n%s", code, out)
	}
	out, code := psql(t, fmt.Sprintf(`BEGIN;
SELECT id, created FROM %s.enqueue('hook', 'psql-committed', '{"from": "psql"}', ordering_key => 'customer-7');
COMMIT;`, o.schema))
	committed := time.Now()
	if code != 0 || !strings.Contains(out, "| t") {
		t.Fatalf("psql commit: exit %d, want a created row\n%s", code, out)
	}
	got := rcv.awaitWoken(t, "psql-committed", committed)
	if got.body != `{"from": "psql"}` {
		t.Fatalf("delivered body %q", got.body)
	}

	out, code = psql(t, fmt.Sprintf(`SELECT * FROM %s.enqueue('hook', E'bad\nkey', '{}');`, o.schema))
	if code == 0 || !strings.Contains(out, "22023") || !strings.Contains(out, "outbox: invalid message: dedup key") {
		t.Fatalf("invalid key: exit %d, want SQLSTATE 22023 naming the dedup key\n%s", code, out)
	}

	// The rolled-back row was enqueued first: had it existed, the claim
	// (in available_at order) would have delivered it before the other.
	if n := len(rcv.arrivals("psql-rolled-back")); n != 0 {
		t.Fatalf("the rolled-back message was delivered %d times", n)
	}
	pool := testdb.Pool(t, 1)
	var rows int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+o.schema+".messages_all WHERE dedup_key <> 'psql-committed'").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("other rows in the outbox: %d, %v", rows, err)
	}
}

// node runs one of the Node.js examples with env added and returns its
// output and exit code.
func node(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(proc.RequireTool(t, "node"), args...)
	cmd.Dir = nodeExamples
	cmd.Env = append(cmd.Environ(), env...)
	return combinedOutput(t, cmd)
}

// TestNodeEnqueueIsDeliveredOnCommitOnly runs examples/node/enqueue.mjs
// (npm's pg, a transaction around <schema>.enqueue()) against `outboxd
// serve` polling every 10 s: a committed message is delivered within
// wokenWithin, carrying on the trace of the traceparent it passed in its
// headers; a rolled-back one never; a repeat is a duplicate with the same
// id; bad input exits 2 with SQLSTATE 22023.
// (Mutation: the SQL function not calling wake() fails this test.)
func TestNodeEnqueueIsDeliveredOnCommitOnly(t *testing.T) {
	t.Parallel()
	requireNodeExamples(t)
	rcv := newReceiver(t)
	o := newOutbox(t, webhookSink("hook", rcv.URL, ""))
	o.serve(t)
	env := []string{"DATABASE_URL=" + testdb.URL(), "OUTBOXD_DATABASE_SCHEMA=" + o.schema}

	if out, code := node(t, append(env, "ROLLBACK=1"), "enqueue.mjs", "hook", "node-rolled-back", `{"from":"node"}`); code != 0 || !strings.HasPrefix(out, "rolled back ") {
		t.Fatalf("rollback: exit %d\n%s", code, out)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	out, code := node(t, append(env, "TRACEPARENT=00-"+traceID+"-00f067aa0ba902b7-01"), "enqueue.mjs", "hook", "node-committed", `{"from":"node"}`)
	committed := time.Now()
	if code != 0 || !strings.HasPrefix(out, "created ") {
		t.Fatalf("commit: exit %d\n%s", code, out)
	}
	got := rcv.awaitWoken(t, "node-committed", committed)
	if tp := got.header.Get("traceparent"); !strings.Contains(tp, traceID) {
		t.Fatalf("delivery's traceparent %q does not continue trace %s", tp, traceID)
	}

	again, code := node(t, env, "enqueue.mjs", "hook", "node-committed", `{"from":"node"}`)
	if code != 0 || again != strings.Replace(out, "created", "duplicate", 1) {
		t.Fatalf("repeat: exit %d, %q; want the first id as a duplicate (%q)", code, again, out)
	}
	bad, code := node(t, env, "enqueue.mjs", "hook", "bad\tkey", `{}`)
	if code != 2 || !strings.Contains(bad, "22023") || !strings.Contains(bad, "not printable") {
		t.Fatalf("a tab in the key: exit %d\n%s", code, bad)
	}
	if n := len(rcv.arrivals("node-rolled-back")); n != 0 {
		t.Fatalf("the rolled-back message was delivered %d times", n)
	}
}

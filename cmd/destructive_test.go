package cmd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// refusedWithoutYes is what a destructive command says when it has no
// terminal to ask on and neither --yes nor --dry-run.
const refusedWithoutYes = "pass --yes to act, or --dry-run to count only"

// TestDestructiveCommandsNeedYesWithoutATerminal: without a terminal
// (a script, kubectl exec without -t) nothing can ask, so dlq redrive,
// dlq purge and destinations delete refuse (exit 2, naming --yes and
// --dry-run) and change nothing; --dry-run counts; --yes acts.
//
// Mutation, failing this test: destructive.check returning nil (dlq
// purge --all purges unasked, as it did before issue 43).
func TestDestructiveCommandsNeedYesWithoutATerminal(t *testing.T) {
	c := newDestCLI(t)
	ids := testdb.DeadRows(t, c.pool, c.ob, "partner", "timeout")
	var created destinations.Created
	c.json(&created, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/outboxd")
	for _, args := range [][]string{
		{"dlq", "purge", "--all"},
		{"dlq", "redrive", "--all", "--sink", "partner"},
		{"dlq", "purge", "--id", "1"},
		{"destinations", "delete", created.ID, "--tenant", "acme"},
	} {
		if out, errOut, code := c.run(false, "", args...); code != exitConfig || !strings.Contains(errOut, refusedWithoutYes) || out != "" {
			t.Errorf("%s without a terminal: exit %d, out %q, err %q; want %d saying %q", strings.Join(args, " "), code, out, errOut, exitConfig, refusedWithoutYes)
		}
	}
	if n := testdb.StatusCounts(t, c.pool, c.ob, "partner")["dead"]; n != 1 {
		t.Fatalf("%d dead letters after the refusals, want the 1 untouched", n)
	}
	if _, errOut, code := c.run(false, "", "destinations", "get", created.ID, "--tenant", "acme"); code != exitOK {
		t.Fatalf("the destination is gone after the refused delete: exit %d, %q", code, errOut)
	}
	if out, errOut, code := c.run(false, "", "dlq", "purge", "--all", "--dry-run"); code != exitOK || out != "would be purged: 1\n" {
		t.Errorf("dry run without a terminal: exit %d, out %q, err %q", code, out, errOut)
	}
	if out, errOut, code := c.run(false, "", "dlq", "redrive", "--id", fmt.Sprint(ids[0]), "--yes"); code != exitOK || out != "redriven 1\n" {
		t.Errorf("redrive --yes without a terminal: exit %d, out %q, err %q", code, out, errOut)
	}
	if out, errOut, code := c.run(false, "", "destinations", "delete", created.ID, "--tenant", "acme", "--yes"); code != exitOK ||
		out != created.ID+" deleted; waiting rows deleted with it (0 rows)\n" {
		t.Errorf("delete --yes without a terminal: exit %d, out %q, err %q", code, out, errOut)
	}
}

// TestDestinationDeleteCountsFirst: destinations delete counts the rows
// waiting for the destination first: --dry-run only counts (table and
// JSON); on a terminal it asks, naming the destination, its URL and the
// count, and deletes only on yes.
//
// Mutations, each failing this test: the count-and-ask branch taken for
// --dry-run only (a terminal's "n" deletes); the dry run falling through
// to the delete (the destination is gone after it).
func TestDestinationDeleteCountsFirst(t *testing.T) {
	c := newDestCLI(t)
	var created destinations.Created
	c.json(&created, "destinations", "create", "--tenant", "acme", "--url", "https://hooks.acme.example/outboxd")
	id := created.ID
	for _, key := range []string{"k1", "k2"} {
		if _, errOut, code := c.run(false, "", "enqueue", "--sink", "customers", "--destination", id, "--key", key, "--text", "hi"); code != exitOK {
			t.Fatalf("enqueue: %q", errOut)
		}
	}
	out, errOut, code := c.run(false, "", "destinations", "delete", id, "--tenant", "acme", "--dry-run")
	if code != exitOK || out != id+" would be deleted, with its secrets and waiting rows (2 rows)\n" {
		t.Fatalf("dry run: exit %d, out %q, err %q", code, out, errOut)
	}
	var plan map[string]any
	c.json(&plan, "destinations", "delete", id, "--tenant", "acme", "--dry-run")
	if plan["id"] != id || plan["rows"] != 2.0 || plan["dry_run"] != true {
		t.Errorf("dry run -o json: %v", plan)
	}
	question := "delete destination " + id + " of tenant acme (https://hooks.acme.example/outboxd), its signing secrets and its 2 waiting row(s)? [y/N]"
	out, errOut, code = c.run(true, "n\n", "destinations", "delete", id, "--tenant", "acme")
	if code != exitFailure || out != "" || !strings.Contains(errOut, question) || !strings.Contains(errOut, "not confirmed; nothing changed") {
		t.Fatalf("answered no: exit %d, out %q, err %q", code, out, errOut)
	}
	if _, errOut, code := c.run(false, "", "destinations", "get", id, "--tenant", "acme"); code != exitOK {
		t.Fatalf("the destination is gone after a dry run and a no: exit %d, %q", code, errOut)
	}
	out, errOut, code = c.run(true, "y\n", "destinations", "delete", id, "--tenant", "acme")
	if code != exitOK || out != id+" deleted; waiting rows deleted with it (2 rows)\n" || !strings.Contains(errOut, question) {
		t.Fatalf("answered yes: exit %d, out %q, err %q", code, out, errOut)
	}
	// Not found: the exit code is the one every "not found" has (not
	// this test's to fix).
	if out, errOut, code := c.run(true, "y\n", "destinations", "delete", id, "--tenant", "acme", "--dry-run"); code == exitOK ||
		!strings.Contains(errOut, "no such destination") || out != "" {
		t.Errorf("dry run of a deleted destination: exit %d, out %q, err %q; want a failure saying so", code, out, errOut)
	}
}

// TestUnknownSinkInAFilterWarns: a --sink filter naming no configured
// sink warns on stderr with the nearest configured one, and the command
// still answers (exit 0, its empty answer); sinks pause of such a name
// is refused naming the nearest sink and --force.
//
// Mutations, each failing this test: warnUnknownSink doing nothing (no
// warning); unknownSink leaving out the suggestion; the pause refusal
// without unknownSink's text (no partner, as before issue 43).
func TestUnknownSinkInAFilterWarns(t *testing.T) {
	c := newCLI(t)
	c.api.deadRows(t, "partner", "timeout")
	const warning = "Warning: no sink partnr is configured; did you mean partner?\n"
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"dlq", "list", "--sink", "partnr"}, "ID  SINK  DEDUP_KEY  ATTEMPTS  UPDATED_AT  LAST_ERROR\n"},
		{[]string{"dlq", "redrive", "--all", "--sink", "partnr", "--dry-run"}, "would be redriven: 0\n"},
		{[]string{"dlq", "purge", "--all", "--sink", "partnr", "--dry-run"}, "would be purged: 0\n"},
		{[]string{"messages", "list", "--sink", "partnr"}, ""},
	} {
		out, errOut, code := c.run(false, "", tc.args...)
		if code != exitOK || errOut != warning || (tc.out != "" && out != tc.out) {
			t.Errorf("%s: exit %d, out %q, err %q; want 0, %q and the warning", strings.Join(tc.args, " "), code, out, errOut, tc.out)
		}
	}
	if out, errOut, code := c.run(false, "", "dlq", "list", "--sink", "partner"); code != exitOK || errOut != "" || !strings.Contains(out, "timeout") {
		t.Errorf("a configured sink: exit %d, out %q, err %q; want its dead letter and no warning", code, out, errOut)
	}
	if _, errOut, _ := c.run(false, "", "dlq", "list", "--sink", "zzzzzzzzzz"); errOut != "Warning: no sink zzzzzzzzzz is configured\n" {
		t.Errorf("a name near no sink: err %q; want the warning without a suggestion", errOut)
	}
	_, errOut, code := c.run(false, "", "sinks", "pause", "partnr")
	if code != exitConfig || !strings.Contains(errOut, "no sink partnr is configured") || !strings.Contains(errOut, "did you mean partner?") ||
		!strings.Contains(errOut, "pass --force to pause partnr anyway") {
		t.Errorf("sinks pause partnr: exit %d, err %q; want %d naming partner and --force", code, errOut, exitConfig)
	}
	if out, errOut, code := c.run(false, "", "sinks", "pause", "partnr", "--force"); code != exitOK || !strings.HasPrefix(out, "paused partnr") {
		t.Errorf("sinks pause partnr --force: exit %d, out %q, err %q", code, out, errOut)
	}
}

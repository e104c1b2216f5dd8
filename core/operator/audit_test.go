package operator_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// refuse makes table's changes fail until the returned function drops
// the trigger that raises: trigger is "TRIGGER refuse BEFORE INSERT ON %s"
// (the statement fails) or "CONSTRAINT TRIGGER refuse AFTER DELETE ON %s
// DEFERRABLE INITIALLY DEFERRED" (the commit fails), %s the table.
func refuse(t *testing.T, b coretest.Bundle, table, trigger string) func() {
	t.Helper()
	s := b.Outbox.Schema()
	for _, stmt := range []string{
		"CREATE OR REPLACE FUNCTION " + s + ".refuse() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'refused by the test'; END$$",
		"CREATE " + fmt.Sprintf(trigger, s+"."+table) + " FOR EACH ROW EXECUTE FUNCTION " + s + ".refuse()",
	} {
		if _, err := b.Pool.Exec(b.Ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if _, err := b.Pool.Exec(b.Ctx, "DROP TRIGGER refuse ON "+s+"."+table); err != nil {
			t.Fatal(err)
		}
	}
}

// auditEntries lists the audit trail, newest first, without the
// migration that made the schema.
func auditEntries(t *testing.T, b coretest.Bundle) []audit.Entry {
	t.Helper()
	entries, err := b.Outbox.Audit().List(b.Ctx, b.Pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(entries, func(e audit.Entry) bool { return e.Action == audit.ActionMigrate })
}

// An operator action and its audit entry commit together or not at all:
// when the entry cannot be written, the purge and the pause roll back;
// when the purge's commit fails, no entry is left; in the caller's transaction
// that rolls back, neither stays; done, the entry says who, what and how
// many.
// (Mutations, each failing this test: Trail.Do writing the entry through
// the pool instead of the action's transaction; Do writing the entry
// before the action, in a transaction of its own; PauseSink running its
// statement outside Do.)
func TestAuditEntryCommitsWithItsAction(t *testing.T) {
	b := coretest.Setup(t)
	for _, id := range b.EnqueueN(t, "partner", 2, keyed("dead")) {
		setDead(t, b, id)
	}
	all := operator.RedriveFilter{All: true, Sink: "partner"}

	allow := refuse(t, b, "audit_log", "TRIGGER refuse BEFORE INSERT ON %s")
	if _, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, all); err == nil {
		t.Fatal("purge: done though its audit entry could not be written")
	}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "partner", operator.Pause{For: time.Hour}); err == nil {
		t.Fatal("pause: done though its audit entry could not be written")
	}
	allow()
	if c := b.StatusCounts(t); c["dead"] != 2 {
		t.Fatalf("after a purge whose entry failed: %v; want the 2 dead letters kept", c)
	}
	if states, err := b.Outbox.SinkStates(b.Ctx, b.Pool); err != nil || states["partner"].Paused() {
		t.Fatalf("after a pause whose entry failed: %+v %v; want no pause", states["partner"], err)
	}

	// The purge's commit fails, after its statement and its entry ran.
	allow = refuse(t, b, "messages", "CONSTRAINT TRIGGER refuse AFTER DELETE ON %s DEFERRABLE INITIALLY DEFERRED")
	if _, err := b.Outbox.Purge(b.Ctx, b.Pool, testdb.Actor, all); err == nil {
		t.Fatal("purge: succeeded though its commit was refused")
	}
	allow()
	tx, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := b.Outbox.Purge(b.Ctx, tx, testdb.Actor, all); err != nil || res.Rows != 2 {
		t.Fatalf("purge in the caller's transaction: %+v %v", res, err)
	}
	if err := tx.Rollback(b.Ctx); err != nil {
		t.Fatal(err)
	}
	if entries := auditEntries(t, b); len(entries) != 0 {
		t.Fatalf("after actions that failed or rolled back: %+v; want no audit entry", entries)
	}
	if c := b.StatusCounts(t); c["dead"] != 2 {
		t.Fatalf("after the caller rolled back: %v; want the 2 dead letters kept", c)
	}

	ops := audit.Actor{Name: "ops", Role: "operate", Source: "192.0.2.1"}
	if res, err := b.Outbox.Purge(b.Ctx, b.Pool, ops, all); err != nil || res.Rows != 2 {
		t.Fatalf("purge: %+v %v", res, err)
	}
	entries := auditEntries(t, b)
	if len(entries) != 1 {
		t.Fatalf("after the purge: %+v; want its one entry", entries)
	}
	e := entries[0]
	if e.Actor != "ops" || e.Role != "operate" || e.Source != "192.0.2.1" || e.Action != audit.ActionPurge || e.Sink != "partner" ||
		e.Count != 2 || compact(e.Filter) != `{"all":true,"sink":"partner"}` || time.Since(e.At) > time.Minute {
		t.Fatalf("the purge's entry: %+v (filter %s)", e, e.Filter)
	}
}

// Pauses, resumes and forgotten pauses are recorded with who, the sink,
// the reason and what the resume closed; dry runs and a confirmation whose
// selection changed are not recorded, since they change nothing.
// (Mutations, each failing this test: ResumeSink not recording; the
// entry written for a dry run; ForgetSink recording a sink without
// state.)
func TestAuditRecordsPausesAndNothingForDryRuns(t *testing.T) {
	b := coretest.Setup(t)
	alice := audit.Actor{Name: "alice", Role: "operate", Source: "cli"}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, alice, "gone", operator.Pause{Reason: "typo"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.ResumeSink(b.Ctx, b.Pool, alice, "gone", "", "fixed"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.ForgetSink(b.Ctx, b.Pool, alice, "gone", false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.ForgetSink(b.Ctx, b.Pool, alice, "gone", false); err == nil {
		t.Fatal("forgetting a sink without state succeeded")
	}
	if _, err := b.Outbox.Redrive(b.Ctx, b.Pool, alice, operator.RedriveFilter{All: true, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	entries := auditEntries(t, b)
	var got []string
	for _, e := range entries {
		got = append(got, e.Action+" "+e.Sink+" "+e.Actor+" "+compact(e.Detail))
	}
	want := []string{
		`forget gone alice {"was_paused":false}`,
		`resume gone alice {"reason":"fixed","was_paused":true,"closed_breakers":[]}`,
		`pause gone alice {"reason":"typo","until_resumed":true}`,
	}
	if len(got) != len(want) {
		t.Fatalf("entries, newest first:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// compact is a stored JSON value without the spaces jsonb adds.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

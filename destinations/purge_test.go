package destinations_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestPurgeCountsThenDeletesOneDestinationsWaitingRows: an operator
// counts the rows of one disabled destination (waiting, and its dead
// one) with a dry run and confirms with its token: exactly the rows
// counted go (a row parked after the count stays), another destination's
// waiting rows of the same sink and tenant are untouched, the purge is
// in the audit trail with the destination and its count, and without
// waiting only the destination's dead rows are selected. Redrive refuses
// the filter.
//
// Mutations, each failing this test: purge.sql without the destination
// test (the dry run counts the other destination's rows too); auditFilter
// without Destination (the audit entry does not name it); Redrive
// accepting a destination.
func TestPurgeCountsThenDeletesOneDestinationsWaitingRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	gone, kept := f.create(t, "acme"), f.create(t, "acme")
	for _, id := range []string{gone.ID, kept.ID} {
		if _, err := f.store.SetEnabled(ctx, f.pool, testdb.Actor, "acme", id, false, "customer away"); err != nil {
			t.Fatal(err)
		}
	}
	f.publish(t, f.pool, "order.created", "o1", "acme")
	f.publish(t, f.pool, "order.paid", "o1", "acme")
	dead, err := f.ob.EnqueueDestination(ctx, f.pool, gone.ID, outboxd.Message{Sink: "customers", DedupKey: "welcome", Payload: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `UPDATE `+f.ob.Schema()+`.messages SET status = 'dead', attempts = 1, last_error = '410 gone' WHERE id = $1`, dead.ID); err != nil {
		t.Fatal(err)
	}

	selection := operator.RedriveFilter{All: true, Waiting: true, Destination: gone.ID}
	plan := selection
	plan.DryRun = true
	counted, err := f.ob.Purge(ctx, f.pool, testdb.Actor, plan)
	if err != nil || counted.Rows != 3 {
		t.Fatalf("dry run: %+v %v; want the destination's 2 waiting rows and its dead one", counted, err)
	}
	if n := len(f.rows(t)); n != 5 {
		t.Fatalf("the dry run deleted rows: %d destination rows left, want 5", n)
	}
	// Parked after the count: not part of what the token confirms.
	f.publish(t, f.pool, "order.shipped", "o1", "acme")

	selection.Token = counted.Token
	done, err := f.ob.Purge(ctx, f.pool, testdb.Actor, selection)
	if err != nil || done.Rows != 3 {
		t.Fatalf("confirmed purge: %+v %v; want the 3 counted", done, err)
	}
	left := map[string]int{}
	for key, r := range f.rows(t) {
		if !r.waiting {
			t.Errorf("row %s: %+v; want it still waiting", key, r)
		}
		left[r.destination]++
	}
	if left[gone.ID] != 1 || left[kept.ID] != 3 || len(left) != 2 {
		t.Errorf("rows left by destination: %v; want 1 of %s (parked after the count) and 3 of %s", left, gone.ID, kept.ID)
	}

	trail := f.ob.Audit()
	entries, err := trail.List(ctx, f.pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var purges int
	for _, e := range entries {
		if e.Action != audit.ActionPurge {
			continue
		}
		purges++
		var filter struct {
			Destination string
			Waiting     bool
		}
		if err := json.Unmarshal(e.Filter, &filter); err != nil || filter.Destination != gone.ID || !filter.Waiting || e.Count != 3 || e.Actor != testdb.Actor.Name {
			t.Errorf("the purge's audit entry: actor %q, count %d, filter %s; want the destination %s and 3", e.Actor, e.Count, e.Filter, gone.ID)
		}
	}
	if purges != 1 {
		t.Errorf("%d purges in the audit trail, want the confirmed one only (a dry run records nothing)", purges)
	}

	deadOnly, err := f.ob.Purge(ctx, f.pool, testdb.Actor, operator.RedriveFilter{All: true, Destination: kept.ID, DryRun: true})
	if err != nil || deadOnly.Rows != 0 {
		t.Errorf("a dry run of the dead rows of %s: %+v %v; want 0 (its rows wait, none is dead)", kept.ID, deadOnly, err)
	}
	if _, err := f.ob.Redrive(ctx, f.pool, testdb.Actor, operator.RedriveFilter{All: true, Destination: kept.ID}); err == nil {
		t.Error("a redrive by destination was accepted")
	}
	if _, err := f.ob.Purge(ctx, f.pool, testdb.Actor, operator.RedriveFilter{All: true, Waiting: true}); err == nil || errors.Is(err, operator.ErrSelectionChanged) {
		t.Errorf("purging every waiting row of every sink: %v; want it refused", err)
	}
}

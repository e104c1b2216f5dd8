package destinations_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestGoEnqueueAddressesOneDestination: core's EnqueueDestination, in
// the producer's transaction, writes one row for the destination named
// (its header, its ordering per destination), none when the transaction
// rolls back, the same row again for the same dedup key, a parked row
// for a disabled destination; an unknown destination and a delayed
// message are refused as invalid messages.
//
// Mutations, each failing this test: enqueue_destination.sql calling
// enqueue() instead of enqueue_destination() (the row carries no
// destination and an unknown one is stored); classifyEnqueueError
// returning nil (the refusal no longer wraps outboxd.ErrInvalidMessage);
// EnqueueDestination taking its Created from anything but the function's
// answer (the duplicate reported created).
func TestGoEnqueueAddressesOneDestination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	d := f.create(t, "acme")
	paused := f.create(t, "acme")
	if _, err := f.store.SetEnabled(ctx, f.pool, testdb.Actor, "acme", paused.ID, false, "paused"); err != nil {
		t.Fatal(err)
	}
	welcome := outboxd.Message{Sink: "customers", DedupKey: "welcome-1", Payload: map[string]string{"hello": "acme"}, OrderingKey: "onboarding"}

	tx, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ob.EnqueueDestination(ctx, tx, d.ID, outboxd.Message{Sink: "customers", DedupKey: "rolled-back", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := f.ob.EnqueueDestination(ctx, tx, d.ID, welcome)
	if err != nil || !first.Created {
		t.Fatalf("enqueue for %s: %+v %v", d.ID, first, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := f.ob.EnqueueDestination(ctx, f.pool, d.ID, welcome)
	if err != nil || again.Created || again.ID != first.ID {
		t.Errorf("the same dedup key again: %+v %v; want the row %d, not created", again, err, first.ID)
	}
	if _, err := f.ob.EnqueueDestination(ctx, f.pool, paused.ID, outboxd.Message{Sink: "customers", DedupKey: "welcome-2", Payload: "x"}); err != nil {
		t.Fatal(err)
	}

	rows := f.rows(t)
	if _, ok := rows["rolled-back"]; ok || len(rows) != 2 {
		t.Errorf("rows addressed to destinations: %+v; want welcome-1 and welcome-2 only", rows)
	}
	if r := rows["welcome-1"]; r.destination != d.ID || r.waiting || r.status != "pending" {
		t.Errorf("welcome-1: %+v; want pending for %s", r, d.ID)
	}
	if r := rows["welcome-2"]; r.destination != paused.ID || !r.waiting {
		t.Errorf("welcome-2: %+v; want parked for the disabled %s", r, paused.ID)
	}
	var ordering, payload string
	if err := f.pool.QueryRow(ctx, `SELECT ordering_key, payload::text FROM `+f.ob.Schema()+`.messages WHERE id = $1`, first.ID).Scan(&ordering, &payload); err != nil {
		t.Fatal(err)
	}
	if ordering != "customers/"+d.ID+"/onboarding" || payload != `{"hello": "acme"}` {
		t.Errorf("welcome-1: ordering key %q, payload %s", ordering, payload)
	}

	_, err = f.ob.EnqueueDestination(ctx, f.pool, "dst_nope", outboxd.Message{Sink: "customers", DedupKey: "k", Payload: "x"})
	if !errors.Is(err, outboxd.ErrInvalidMessage) || !strings.Contains(err.Error(), `no destination "dst_nope"`) {
		t.Errorf("an unknown destination: %v; want an invalid message naming it", err)
	}
	_, err = f.ob.EnqueueDestination(ctx, f.pool, d.ID, outboxd.Message{Sink: "customers", DedupKey: "later", Payload: "x", AvailableAt: time.Now().Add(time.Hour)})
	if !errors.Is(err, outboxd.ErrInvalidMessage) {
		t.Errorf("a delayed message: %v; want an invalid message", err)
	}
	if len(f.rows(t)) != 2 {
		t.Errorf("a refused message was stored: %+v", f.rows(t))
	}
}

package destinations_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// TestTenantScopedActionsReachOnlyTheTenantsOwn: a test event and the
// dead rows to redrive are found through the tenant: another tenant's
// destination is ErrNotFound and gets no row; a test event is one row for
// the destination, in the Standard Webhooks envelope, a new one each
// time; DeadRows lists only that destination's dead rows.
//
// Mutations: destination_enqueue.sql's tenant condition made always true
// enqueues for globex's destination; destination_dead_rows.sql's tenant
// condition made always true, or without its phase condition, fails the
// dead-row checks.
func TestTenantScopedActionsReachOnlyTheTenantsOwn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme, globex := f.create(t, "acme"), f.create(t, "globex")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	if _, err := f.store.SendTestEvent(t.Context(), f.pool, testdb.Actor, "acme", globex.ID, "customers", now); !errors.Is(err, destinations.ErrNotFound) {
		t.Fatalf("acme's test event to globex's destination: %v, want ErrNotFound", err)
	}
	var input *destinations.InputError
	if _, err := f.store.SendTestEvent(t.Context(), f.pool, testdb.Actor, "acme", acme.ID, "", now); !errors.As(err, &input) {
		t.Fatalf("a test event without a sink: %v, want an InputError", err)
	}
	first, err := f.store.SendTestEvent(t.Context(), f.pool, testdb.Actor, "acme", acme.ID, "customers", now)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.store.SendTestEvent(t.Context(), f.pool, testdb.Actor, "acme", acme.ID, "customers", now)
	if err != nil {
		t.Fatal(err)
	}
	rows := f.rows(t)
	if len(rows) != 2 || rows[first.DedupKey].destination != acme.ID || rows[second.DedupKey].destination != acme.ID || first.DedupKey == second.DedupKey {
		t.Fatalf("rows after two test events %v, want two, both for %s", rows, acme.ID)
	}
	var payload struct {
		Type, Timestamp string
		Data            struct{ Destination string }
	}
	var raw []byte
	if err := f.pool.QueryRow(t.Context(), `SELECT payload FROM `+f.ob.Schema()+`.messages WHERE id = $1`, first.MessageID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &payload); err != nil || payload.Type != destinations.TestEventType || payload.Data.Destination != acme.ID || payload.Timestamp != "2026-03-01T12:00:00Z" {
		t.Errorf("test event payload %s (%v)", raw, err)
	}

	// Kill the first test event's row and one of globex's.
	if _, err := f.store.SendTestEvent(t.Context(), f.pool, testdb.Actor, "globex", globex.ID, "customers", now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(t.Context(), `UPDATE `+f.ob.Schema()+`.messages SET status = 'dead'
		WHERE id = $1 OR headers->>'outboxd-destination' = $2`, first.MessageID, globex.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.DeadRows(t.Context(), f.pool, "acme", globex.ID, 0); !errors.Is(err, destinations.ErrNotFound) {
		t.Errorf("acme asking for globex's dead rows: %v, want ErrNotFound", err)
	}
	dead, err := f.store.DeadRows(t.Context(), f.pool, "acme", acme.ID, 0)
	if err != nil || !slices.Equal(dead, []int64{first.MessageID}) {
		t.Errorf("acme's dead rows %v (%v), want [%d]: its one dead row, not the pending one nor globex's", dead, err, first.MessageID)
	}
	if only, err := f.store.DeadRows(t.Context(), f.pool, "acme", acme.ID, second.MessageID); err != nil || len(only) != 0 {
		t.Errorf("acme's dead rows limited to its pending row: %v (%v), want none", only, err)
	}
}

// TestListAllPagesThroughEveryTenant: ListAll returns every tenant's
// destinations in id order, a page at a time, with the next page's
// cursor.
//
// Mutation: listed cutting the page without reading one past it (next
// always "") fails it.
func TestListAllPagesThroughEveryTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var want []string
	for _, tenant := range []string{"acme", "globex", "initech"} {
		want = append(want, f.create(t, tenant).ID)
	}
	slices.Sort(want)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, next, err := f.store.ListAll(t.Context(), f.pool, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			got = append(got, d.ID)
		}
		if next == "" {
			if pages != 1 {
				t.Errorf("%d pages of 2 for 3 destinations, want 2", pages+1)
			}
			break
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("ListAll gave %v, want %v", got, want)
	}
}

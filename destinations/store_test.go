package destinations_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/registry"
	"github.com/outboxd/outboxd/routing"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// testKey is a fixed sealing key, in EnvSecretsKey's form.
const testKey = "k1:" + "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// fixture is a migrated outbox whose routes send order.* and invoice.*
// to the tenant in .data.account_id through a destinations sink.
type fixture struct {
	pool  *pgxpool.Pool
	ob    *testdb.Outbox
	store *destinations.Store
	keys  *destinations.Keyring
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	pool, ob := testdb.New(t)
	keys, err := destinations.ParseKeyring(testKey)
	if err != nil {
		t.Fatal(err)
	}
	st := ob.Destinations(keys)
	s, err := sinkdest.Type.New("customers", nil, sink.Env{})
	if err != nil {
		t.Fatal(err)
	}
	table, problems := routing.Compile(routing.Config{Unmatched: routing.UnmatchedDrop, Routes: map[string]routing.Route{
		"billing": {Events: []string{"order.*", "invoice.*"}, To: []routing.Target{{Sink: "customers", Tenant: "{{.data.account_id}}"}}},
	}}, map[string]sink.Sink{"customers": s})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if _, err := ob.Routes().Apply(t.Context(), pool, table, testdb.Actor); err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: pool, ob: ob, store: st, keys: keys}
}

func (f *fixture) create(t *testing.T, tenant string, events ...string) destinations.Created {
	t.Helper()
	c, err := f.store.Create(t.Context(), f.pool, testdb.Actor, tenant, destinations.Spec{URL: "https://" + tenant + ".example/hook", Events: events})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// delete deletes destination id of tenant as the API and the CLI do:
// counted first, then deleted with the count's token.
func (f *fixture) delete(t *testing.T, tenant, id string) (int64, error) {
	t.Helper()
	c, err := f.store.CountDelete(t.Context(), f.pool, tenant, id)
	if err != nil {
		return 0, err
	}
	done, err := f.store.DeleteCounted(t.Context(), f.pool, testdb.Actor, tenant, id, c.Token)
	return done.Rows, err
}

// publish publishes order.created key for account in one transaction.
func (f *fixture) publish(t *testing.T, db outboxd.DBTX, typ, key, account string) []outboxd.Published {
	t.Helper()
	p, err := f.ob.Publish(t.Context(), db, outboxd.Event{Type: typ, Key: key, Data: map[string]any{"account_id": account}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// destinationRow is one row addressed to a destination.
type destinationRow struct {
	destination, dedupKey, status string
	waiting                       bool
}

// rows returns the rows addressed to destinations, by dedup key.
func (f *fixture) rows(t *testing.T) map[string]destinationRow {
	t.Helper()
	rs, err := f.pool.Query(t.Context(), `SELECT headers->>'outboxd-destination', dedup_key, status, available_at = 'infinity'
		FROM `+f.ob.Schema()+`.messages WHERE headers ? 'outboxd-destination'`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]destinationRow{}
	for rs.Next() {
		var r destinationRow
		if err := rs.Scan(&r.destination, &r.dedupKey, &r.status, &r.waiting); err != nil {
			t.Fatal(err)
		}
		out[r.dedupKey] = r
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// producerTx begins a producer's transaction as the hostile-data tests
// run it: under the 10 s statement timeout, having written an
// order of its own (the orders table, created here) before it publishes.
// It is rolled back when the test ends unless committed.
func (f *fixture) producerTx(t *testing.T) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	schema := f.ob.Schema()
	if _, err := f.pool.Exec(ctx, "CREATE TABLE "+schema+".orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := f.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '10s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".orders VALUES ('o-1')"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// committed commits tx (see producerTx) and returns what it left: its
// order rows and the rows of each destination.
func (f *fixture) committed(t *testing.T, tx pgx.Tx) (orders int, perDestination map[string]int) {
	t.Helper()
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.QueryRow(t.Context(), "SELECT count(*) FROM "+f.ob.Schema()+".orders").Scan(&orders); err != nil {
		t.Fatal(err)
	}
	perDestination = map[string]int{}
	for _, r := range f.rows(t) {
		perDestination[r.destination]++
	}
	return orders, perDestination
}

// receipt is the routed row's record of its fan-out.
func (f *fixture) receipt(t *testing.T, id int64) string {
	t.Helper()
	var r string
	if err := f.pool.QueryRow(t.Context(), `SELECT receipt::text FROM `+f.ob.Schema()+`.messages WHERE id = $1`, id).Scan(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPublishFansOutToTheTenantsSubscribedDestinations publishes in the
// producer's transaction: one row per destination of the event's tenant
// subscribed to its type (not another tenant's, not one subscribed to
// other types), deduplicated per destination on a second publish, none
// for a rolled-back transaction, and for a tenant without a matching
// destination nothing but the routed row's receipt saying so.
//
// Mutations: dropping the tenant test of fan_out_destinations() gives
// globex's destination a row; dropping its pattern test gives the
// invoice-only destination one; dropping the header test from the
// messages_fan_out trigger's WHEN fans each destination's row out again,
// without end (the publish never returns and the test times out).
func TestPublishFansOutToTheTenantsSubscribedDestinations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orders := f.create(t, "acme", "order.*")
	every := f.create(t, "acme")
	f.create(t, "acme", "invoice.*")
	f.create(t, "globex")

	tx, err := f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := f.publish(t, tx, "order.created", "o1", "acme")
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"order.created/o1/billing/" + orders.ID: orders.ID, "order.created/o1/billing/" + every.ID: every.ID}
	got := f.rows(t)
	if len(got) != len(want) {
		t.Fatalf("rows %v, want one for each of %v", got, want)
	}
	for key, dst := range want {
		if got[key].destination != dst || got[key].status != "pending" || got[key].waiting {
			t.Errorf("row %s = %+v, want pending for %s", key, got[key], dst)
		}
	}
	if r := f.receipt(t, p[0].ID); r != `{"tenant": "acme", "destinations": 2}` {
		t.Errorf("routed row's receipt %s", r)
	}

	f.publish(t, f.pool, "order.created", "o1", "acme")
	if n := len(f.rows(t)); n != 2 {
		t.Errorf("publishing again made %d rows, want the 2 there were", n)
	}

	tx, err = f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.publish(t, tx, "order.created", "o2", "acme")
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.rows(t)); n != 2 {
		t.Errorf("a rolled-back publish left %d rows, want 2", n)
	}

	p = f.publish(t, f.pool, "order.created", "o3", "initech")
	if r := f.receipt(t, p[0].ID); r != `{"tenant": "initech", "destinations": 0}` {
		t.Errorf("receipt of an event for a tenant without destinations: %s", r)
	}
	if n := len(f.rows(t)); n != 2 {
		t.Errorf("an event for a tenant without destinations made rows: %d, want 2", n)
	}
}

// TestPublishWithoutTheTenantFieldIsRefused: an event lacking the field
// the tenant template reads fails the producer's publish, naming it.
//
// Mutation: returning NULL from event_tenant() for a missing part makes
// the publish succeed.
func TestPublishWithoutTheTenantFieldIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.ob.Publish(t.Context(), f.pool, outboxd.Event{Type: "order.created", Key: "o1", Data: map[string]any{"other": 1}})
	if err == nil || !strings.Contains(err.Error(), "route billing takes its tenant from .data.account_id, which the event lacks") {
		t.Fatalf("publish without account_id: %v", err)
	}
}

// TestDisabledDestinationsRowsWaitUntilEnabled: a disabled destination's
// rows, those waiting when it was disabled and those published since,
// are due at infinity (no relay claims them, none is dead-lettered) and
// counted as waiting; enabling makes every one due.
//
// Mutations: making destination_rows() insert every row due at once
// leaves the row published while disabled due; dropping the moved CTE of
// destination_set_enabled leaves rows parked after enabling.
func TestDisabledDestinationsRowsWaitUntilEnabled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	f.publish(t, f.pool, "order.created", "before", "acme")
	moved, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "customer asked")
	if err != nil || moved != 1 {
		t.Fatalf("disable: %d rows moved, %v; want 1", moved, err)
	}
	f.publish(t, f.pool, "order.created", "after", "acme")
	for key, r := range f.rows(t) {
		if !r.waiting || r.status != "pending" {
			t.Errorf("row %s while disabled: %+v, want pending and waiting", key, r)
		}
	}
	got, err := f.store.Get(t.Context(), f.pool, "acme", d.ID)
	if err != nil || got.Enabled || got.DisabledReason != "customer asked" || *got.Waiting != 2 {
		t.Fatalf("get while disabled: %+v %v", got, err)
	}
	if moved, err = f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, ""); err != nil || moved != 2 {
		t.Fatalf("enable: %d rows moved, %v; want 2", moved, err)
	}
	for key, r := range f.rows(t) {
		if r.waiting {
			t.Errorf("row %s still parked after enabling", key)
		}
	}
}

// TestPublishRacingAnEnableLeavesNoRowParked: a producer's transaction
// that parks a row for a disabled destination, still open while the
// destination is enabled, does not leave the row parked once both
// commit: the enable waits for the producer's share lock on the
// destination and then makes its row due. Both ways round would do; this
// test holds the producer open, so the enable waits.
//
// Mutation: dropping the FOR SHARE of destination_rows()'s disabled CTE
// (the enable then neither waits nor sees the producer's uncommitted row)
// leaves it parked, as it did before migration 021; so does running
// destination_set_enabled without taking destination_lock first.
func TestPublishRacingAnEnableLeavesNoRowParked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "moving"); err != nil {
		t.Fatal(err)
	}
	tx, err := f.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) }()
	f.publish(t, tx, "order.created", "racing", "acme")
	enabled := make(chan error, 1)
	go func() {
		_, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, "")
		enabled <- err
	}()
	var enableErr error
	finished := false
	testrelay.WaitFor(t, 10*time.Second, "the enable to finish or wait for the producer's lock", func() bool {
		select {
		case enableErr = <-enabled:
			finished = true
			return true
		default:
		}
		var waiting bool
		err := f.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%destination_lock%' AND position($1 in query) > 0)`, f.ob.Schema()).Scan(&waiting)
		return err == nil && waiting
	})
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !finished {
		enableErr = <-enabled
	}
	if enableErr != nil {
		t.Fatal(enableErr)
	}
	for key, r := range f.rows(t) {
		if r.waiting {
			t.Errorf("row %s is parked though its destination is enabled", key)
		}
	}
}

// TestARowReachingTheSinkWhileDisabledIsParked: a row of a disabled
// destination that is not parked (in flight when the destination was
// disabled, handed back by the relay afterwards) reaches the sink, which
// answers Retry-After and has the directory park it, so it waits like
// the others instead of coming back until its deferrals run out; once
// the destination is enabled again, a park parks nothing, and the sink
// delivers the row although its directory last read the destination
// disabled (the enable made the row due before the directory heard of
// it: turned away, five such rows opened the destination's breaker and
// had it disabled again).
//
// Mutations: dropping the sink's ParkSoon call leaves the row due (the
// wait times out); dropping the NOT enabled test of destination_park
// parks a row of the enabled destination; dropping the sink's Reread
// turns the row away after the enable.
func TestARowReachingTheSinkWhileDisabledIsParked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "moving"); err != nil {
		t.Fatal(err)
	}
	// The row as the relay hands it back after the sink's Retry-After.
	var id int64
	if err := f.pool.QueryRow(t.Context(), `SELECT e.id FROM `+f.ob.Schema()+`.enqueue_destination('customers', $1, 'late', '{}') e`, d.ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(t.Context(), `UPDATE `+f.ob.Schema()+`.messages SET available_at = now() + interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	dir := f.directory(t, f.keys)
	resources := new(registry.Resources)
	resources.Publish(destinations.DirectoryResource, dir)
	s, err := sinkdest.Type.New("customers", nil, sink.Env{Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Deliver(t.Context(), &sink.Delivery{ID: id, Sink: "customers", DedupKey: "late", Payload: []byte(`{}`),
		Headers: map[string]string{destinations.Header: d.ID}, Attempt: 1, MaxAttempts: 10})
	if _, later := sink.RetryAfterDelay(err); !later {
		t.Fatalf("delivering to a disabled destination: %v, want a Retry-After", err)
	}
	testrelay.WaitFor(t, 10*time.Second, "the row parked", func() bool { return f.rows(t)["late"].waiting })

	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	q, err := store.New(f.ob.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.DestinationPark(t.Context(), f.pool, d.ID); err != nil || n != 0 || f.rows(t)["late"].waiting {
		t.Errorf("a park after enabling parked %d rows (%v), want none", n, err)
	}
	if l, _ := dir.Lookup(d.ID); l.Enabled {
		t.Fatal("the directory read the enable by itself: the test cannot tell a stale read from a fresh one")
	}
	// Port 1 only: the delivery stops at the sink's own check of the URL,
	// which comes after the disabled test, and never leaves the machine.
	portOne, err := sinkdest.Type.New("customers", map[string]any{"ports": []any{1}}, sink.Env{Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	err = portOne.Deliver(t.Context(), &sink.Delivery{ID: id, Sink: "customers", DedupKey: "late", Payload: []byte(`{}`),
		Headers: map[string]string{destinations.Header: d.ID}, Attempt: 2, MaxAttempts: 10})
	if !sink.IsPermanent(err) {
		t.Errorf("delivering after the enable: %v, want the port refused (the destination enabled)", err)
	}
}

// TestDeleteTakesTheWaitingRowsAndCountsThem: deleting a destination
// deletes its waiting rows and reports how many; another destination's
// rows stay.
//
// Mutation: dropping the rows CTE of destination_delete reports 0.
func TestDeleteTakesTheWaitingRowsAndCountsThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gone, kept := f.create(t, "acme"), f.create(t, "acme")
	f.publish(t, f.pool, "order.created", "o1", "acme")
	f.publish(t, f.pool, "order.paid", "o1", "acme")
	n, err := f.delete(t, "acme", gone.ID)
	if err != nil || n != 2 {
		t.Fatalf("delete: %d rows, %v; want 2", n, err)
	}
	for key, r := range f.rows(t) {
		if r.destination != kept.ID {
			t.Errorf("row %s of the deleted destination is left", key)
		}
	}
	if _, err := f.delete(t, "acme", gone.ID); !errors.Is(err, destinations.ErrNotFound) {
		t.Errorf("deleting again: %v, want ErrNotFound", err)
	}
	if _, err := f.store.Get(t.Context(), f.pool, "globex", kept.ID); !errors.Is(err, destinations.ErrNotFound) {
		t.Errorf("another tenant's destination: %v, want ErrNotFound", err)
	}
}

// TestChangesAreAuditedWithTheirCounts: every change of a destination is
// in the audit trail as its actor's, naming tenant and destination, with
// the rows it moved or took (a delete's count is the waiting rows that
// went with it); and disabling ends the destination's circuit breaker, so
// enabled again it starts afresh.
//
// Mutations: dropping the trail.Do of delete (calling the statement on
// db) leaves no destination_delete entry; dropping the ended CTE of
// destination_set_enabled leaves the breaker after disabling.
func TestChangesAreAuditedWithTheirCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	rate := 2.0
	if _, err := f.store.Update(t.Context(), f.pool, testdb.Actor, "acme", d.ID, destinations.Patch{RateLimit: &rate}); err != nil {
		t.Fatal(err)
	}
	f.publish(t, f.pool, "order.created", "o1", "acme")
	f.publish(t, f.pool, "order.paid", "o1", "acme")
	if _, err := f.pool.Exec(t.Context(), `INSERT INTO `+f.ob.Schema()+`.destination_breakers
		(sink, dest_key, reason, last_failure, probe_interval, next_probe_at) VALUES ('customers', $1, 'down', '503', '5s', now())`, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "customer asked"); err != nil {
		t.Fatal(err)
	}
	var breakers int
	if err := f.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+f.ob.Schema()+`.destination_breakers`).Scan(&breakers); err != nil || breakers != 0 {
		t.Errorf("after disabling: %d breakers (%v), want the destination's ended", breakers, err)
	}
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.RotateSecret(t.Context(), f.pool, testdb.Actor, "acme", d.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.delete(t, "acme", d.ID); err != nil {
		t.Fatal(err)
	}
	trail := f.ob.Audit()
	entries, err := trail.List(t.Context(), f.pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !strings.HasPrefix(e.Action, "destination") {
			continue
		}
		got = append(got, fmt.Sprintf("%s %d", e.Action, e.Count))
		var filter struct{ Tenant, Destination string }
		if err := json.Unmarshal(e.Filter, &filter); err != nil || e.Actor != testdb.Actor.Name || filter.Tenant != "acme" || filter.Destination != d.ID {
			t.Errorf("entry %s: actor %q, filter %s", e.Action, e.Actor, e.Filter)
		}
	}
	want := []string{"destination_create 1", "destination_update 1", "destination_disable 2", "destination_enable 2",
		"destination_rotate_secret 1", "destination_delete 2"}
	if !slices.Equal(got, want) {
		t.Errorf("audit trail:\n got %q\nwant %q", got, want)
	}
}

// TestEnqueueDestinationAddressesOneDestination: enqueue_destination()
// writes a row for one destination, parked while it is disabled; an
// unknown destination is refused.
//
// Mutation: dropping the NOT FOUND check enqueues a row no sink can
// deliver.
func TestEnqueueDestinationAddressesOneDestination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "paused"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(t.Context(), `SELECT * FROM `+f.ob.Schema()+`.enqueue_destination('customers', $1, 'welcome-1', '{"hello": 1}')`, d.ID); err != nil {
		t.Fatal(err)
	}
	r := f.rows(t)["welcome-1"]
	if r.destination != d.ID || !r.waiting {
		t.Errorf("enqueued row %+v, want parked for %s", r, d.ID)
	}
	_, err := f.pool.Exec(t.Context(), `SELECT * FROM `+f.ob.Schema()+`.enqueue_destination('customers', 'dst_nope', 'k', '{}')`)
	if err == nil || !strings.Contains(err.Error(), `no destination "dst_nope"`) {
		t.Errorf("enqueue to an unknown destination: %v", err)
	}
}

// TestSecretsAreSealedAtRest: no column of destination_secrets holds the
// secret or its key in any encoding, a keyring without the sealing key
// cannot open it, and after rekey under a new first key the old key can
// go: a directory holding only the new key signs with the same secret.
//
// Mutations: storing the secret's text in sealed (Seal returning it)
// fails the first check; making Rekey skip the reseal leaves the
// directory of the new key unable to open it.
func TestSecretsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.create(t, "acme")
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(c.Secret, "whsec_"))
	var dump []byte
	if err := f.pool.QueryRow(t.Context(), `SELECT convert_to(string_agg(row_to_json(s)::text, ''), 'UTF8') || string_agg(s.sealed, ''::bytea)
		FROM `+f.ob.Schema()+`.destination_secrets s`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	for _, leak := range [][]byte{[]byte(c.Secret), key, []byte(strings.TrimPrefix(c.Secret, "whsec_"))} {
		if strings.Contains(string(dump), string(leak)) {
			t.Fatal("the secret is readable in destination_secrets")
		}
	}

	newKey, err := destinations.NewKey("k2")
	if err != nil {
		t.Fatal(err)
	}
	onlyNew, err := destinations.ParseKeyring(newKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.endpoint(t, onlyNew, c.ID); ok {
		t.Fatal("a keyring without the sealing key opened the secret")
	}
	both, err := destinations.ParseKeyring(newKey + "," + testKey)
	if err != nil {
		t.Fatal(err)
	}
	st := f.ob.Destinations(both)
	if n, err := st.Rekey(t.Context(), f.pool, testdb.Actor); err != nil || n != 1 {
		t.Fatalf("rekey: %d, %v; want 1 resealed", n, err)
	}
	e, ok := f.endpoint(t, onlyNew, c.ID)
	if !ok || len(e.Secrets) != 1 {
		t.Fatalf("after rekey the new key alone cannot sign: %+v", e)
	}
	if sig, ref := e.Secrets[0].Sign("id", time.Unix(1, 0), []byte("{}")), mustSecret(t, c.Secret).Sign("id", time.Unix(1, 0), []byte("{}")); sig != ref {
		t.Error("after rekey the directory signs with another secret")
	}
}

// TestRotationSignsWithBothSecretsUntilTheOldExpires: after a rotation
// with an overlap the directory signs with the new and the old secret;
// after one without, with the new one only.
//
// Mutation: making destination_secret_add expire the old secrets at
// now() whatever the overlap leaves one signature.
func TestRotationSignsWithBothSecretsUntilTheOldExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.create(t, "acme")
	rotated, err := f.store.RotateSecret(t.Context(), f.pool, testdb.Actor, "acme", c.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := f.endpoint(t, f.keys, c.ID)
	if !ok || len(e.Secrets) != 2 {
		t.Fatalf("during the overlap: %d secrets, want 2", len(e.Secrets))
	}
	sign := func(s string) string { return mustSecret(t, s).Sign("id", time.Unix(1, 0), nil) }
	if e.Secrets[0].Sign("id", time.Unix(1, 0), nil) != sign(rotated) || e.Secrets[1].Sign("id", time.Unix(1, 0), nil) != sign(c.Secret) {
		t.Error("the secrets signing are not the new one then the old one")
	}
	if _, err := f.store.RotateSecret(t.Context(), f.pool, testdb.Actor, "acme", c.ID, 0); err != nil {
		t.Fatal(err)
	}
	if e, _ = f.endpoint(t, f.keys, c.ID); len(e.Secrets) != 1 {
		t.Errorf("after a rotation without overlap: %d secrets, want 1", len(e.Secrets))
	}
	if _, err := f.store.RotateSecret(t.Context(), f.pool, testdb.Actor, "globex", c.ID, 0); !errors.Is(err, destinations.ErrNotFound) {
		t.Errorf("rotating another tenant's destination: %v, want ErrNotFound", err)
	}
}

// TestDirectoryPicksUpChangesWithoutRestart: a running directory learns of
// a destination created, disabled and deleted after it started, each
// within a second on an idle machine (asserted with a loaded machine's
// margin).
//
// Mutation: making Refresh skip rows (since = revision + 1) never shows
// the created destination.
func TestDirectoryPicksUpChangesWithoutRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	dir := f.directory(t, f.keys)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go dir.Run(ctx)
	testrelay.WaitFor(t, 10*time.Second, "the first read", func() bool { return dir.Refresh(ctx) == nil })
	c := f.create(t, "acme")
	testrelay.WaitFor(t, 5*time.Second, "the new destination", func() bool { _, ok := dir.Lookup(c.ID); return ok })
	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", c.ID, false, "x"); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 5*time.Second, "the disable", func() bool { l, _ := dir.Lookup(c.ID); return !l.Enabled })
	if _, err := f.delete(t, "acme", c.ID); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 5*time.Second, "the deletion", func() bool { _, ok := dir.Lookup(c.ID); return !ok })
}

// A row enqueued after a rotation committed is signed with the rotated
// secret by a directory that has not heard of the rotation: FindAsOf
// reads again when the row is newer than the directory's last read, and
// keeps what it holds for a row older than that read. (Run is not
// started: no notification ever arrives, as when the row's notification
// reaches the relay first. On 123323f the sink used Find: CI saw a row
// published right after a rotation signed with the old secret alone.
// Mutation: FindAsOf returning Find's answer fails this test with 1
// secret.)
func TestARowNewerThanTheDirectorysReadSeesTheChangesBeforeIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.create(t, "acme")
	ctx := t.Context()
	dir := f.directory(t, f.keys)
	if err := dir.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var before time.Time // a row enqueued before the rotation
	if err := f.pool.QueryRow(ctx, "SELECT now()").Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.RotateSecret(ctx, f.pool, testdb.Actor, "acme", c.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	var after time.Time // a row enqueued once the rotation committed
	if err := f.pool.QueryRow(ctx, "SELECT now()").Scan(&after); err != nil {
		t.Fatal(err)
	}
	secrets := func(enqueued time.Time) int {
		return signingSecrets(t, c.ID)(dir.FindAsOf(ctx, c.ID, enqueued))
	}
	if n := secrets(before.Add(-time.Minute)); n != 1 {
		t.Errorf("a row older than the directory's read: %d secrets, want the 1 it holds", n)
	}
	if n := secrets(after); n != 2 {
		t.Errorf("a row enqueued after the rotation: %d secrets, want 2 (the new and the old)", n)
	}
}

// A row carries the destinations' revision its producer saw
// (RevisionHeader, migration 025), from publish's fan-out and from
// enqueue_destination() alike, and the directory delivers it as that
// revision or newer: one that has not read the revision reads first (the
// rotated secret signs), one that has answers from what it holds (a row
// older than the rotation keeps the one secret the directory read; no
// read of the database). (Mutations: FindAtRevision answering from what it
// holds whatever the revision fails this test with 1 secret for the rows
// made after the rotation; migration 025's trigger left out fails it with
// no revision on either row.)
func TestARowCarriesTheRevisionItsProducerSaw(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.create(t, "acme", "order.*")
	ctx := t.Context()
	dir := f.directory(t, f.keys)
	if err := dir.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	revision := func() int64 {
		var r int64
		if err := f.pool.QueryRow(ctx, "SELECT revision FROM "+f.ob.Schema()+".destinations_state").Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := revision()
	if _, err := f.store.RotateSecret(ctx, f.pool, testdb.Actor, "acme", c.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	after := revision()
	if after <= before {
		t.Fatalf("the rotation left the revision at %d (before: %d)", after, before)
	}
	f.publish(t, f.pool, "order.created", "o-1", "acme")
	direct, err := f.ob.EnqueueDestination(ctx, f.pool, c.ID, outboxd.Message{Sink: "customers", DedupKey: "direct-1", Payload: "x"})
	if err != nil {
		t.Fatal(err)
	}
	carried := map[string]string{}
	rows, err := f.pool.Query(ctx, `SELECT CASE WHEN id = $1 THEN 'enqueue_destination()' ELSE 'publish' END,
		coalesce(headers->>'`+destinations.RevisionHeader+`', '')
		FROM `+f.ob.Schema()+`.messages WHERE headers->>'`+destinations.Header+`' = $2`, direct.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var by, rev string
		if err := rows.Scan(&by, &rev); err != nil {
			t.Fatal(err)
		}
		carried[by] = rev
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, by := range []string{"publish", "enqueue_destination()"} {
		if got, want := carried[by], strconv.FormatInt(after, 10); got != want {
			t.Errorf("the row made by %s carries revision %q, want %q (the rotation's)", by, got, want)
		}
	}
	secrets := func(rev int64) int {
		return signingSecrets(t, c.ID)(dir.FindAtRevision(ctx, c.ID, rev))
	}
	if n := secrets(before); n != 1 {
		t.Errorf("a row of the revision before the rotation: %d secrets, want the 1 the directory holds (no read)", n)
	}
	if n := secrets(after); n != 2 {
		t.Errorf("a row of the rotation's revision: %d secrets, want 2 (the new and the old)", n)
	}
}

// signingSecrets returns how many secrets sign for destination id now,
// given a find's answer for it; it fails the test when the find did not
// find it.
func signingSecrets(t *testing.T, id string) func(l *destinations.Live, ok bool, err error) int {
	t.Helper()
	return func(l *destinations.Live, ok bool, err error) int {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("find %s: %v %v", id, ok, err)
		}
		e, err := l.Endpoint(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return len(e.Secrets)
	}
}

// directory returns a new directory of f's outbox opening secrets with
// keys, not yet read.
func (f *fixture) directory(t *testing.T, keys *destinations.Keyring) *destinations.Directory {
	t.Helper()
	dir, err := f.ob.Directory(keys, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// endpoint reads destination id through a fresh directory opening with
// keys; false when it cannot sign.
func (f *fixture) endpoint(t *testing.T, keys *destinations.Keyring, id string) (e standardwebhooks.Endpoint, ok bool) {
	t.Helper()
	dir := f.directory(t, keys)
	l, found, err := dir.Find(t.Context(), id)
	if err != nil || !found {
		t.Fatalf("find %s: %v %v", id, found, err)
	}
	e, err = l.Endpoint(time.Now())
	return e, err == nil
}

// mustSecret parses a secret's text.
func mustSecret(t *testing.T, text string) standardwebhooks.Secret {
	t.Helper()
	s, err := standardwebhooks.ParseSecret(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Enabling a disabled destination starts it afresh: a row a failure put
// off while it was being disabled (a delivery or probe in flight at the
// disable, its error stored, due at its next probe) comes due at once, as
// a breaker's close makes it, and a breaker that failure opened again is
// ended. Enabling an enabled destination changes neither: it is no way
// around a breaker or a backoff.
//
// Mutations: destination_set_enabled moving only the rows parked at
// infinity leaves the put-off row due in an hour (the auto-disable test
// with the binary then waited out the next probe, past its 30 s, in a
// loaded CI run); ending breakers on disable only leaves the re-opened
// one; dropping "NOT (SELECT enabled FROM was)" makes the second enable
// move the row and end the breaker.
func TestEnablingStartsTheDestinationAfresh(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.create(t, "acme")
	f.publish(t, f.pool, "order.created", "k", "acme")
	s := f.ob.Schema()
	putOff := func() {
		t.Helper()
		if _, err := f.pool.Exec(t.Context(), `UPDATE `+s+`.messages SET available_at = now() + interval '1 hour', last_error = '503'
			WHERE headers->>'outboxd-destination' = $1`, d.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(t.Context(), `INSERT INTO `+s+`.destination_breakers (sink, dest_key, reason, last_failure, probe_interval, next_probe_at)
			VALUES ('customers', $1, 'down', '503', interval '10 seconds', now() + interval '10 seconds')`, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	state := func() (due bool, breakers int) {
		t.Helper()
		if err := f.pool.QueryRow(t.Context(), `SELECT bool_and(available_at <= now()), (SELECT count(*) FROM `+s+`.destination_breakers WHERE dest_key = $1)
			FROM `+s+`.messages WHERE headers->>'outboxd-destination' = $1`, d.ID).Scan(&due, &breakers); err != nil {
			t.Fatal(err)
		}
		return due, breakers
	}

	if _, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, false, "down"); err != nil {
		t.Fatal(err)
	}
	putOff() // what a delivery in flight at the disable wrote afterwards
	if moved, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, ""); err != nil || moved != 1 {
		t.Fatalf("enable: %d rows moved, %v; want the put-off row", moved, err)
	}
	if due, breakers := state(); !due || breakers != 0 {
		t.Errorf("after enabling: row due %v, %d breakers; want it due and none", due, breakers)
	}

	putOff()
	if moved, err := f.store.SetEnabled(t.Context(), f.pool, testdb.Actor, "acme", d.ID, true, ""); err != nil || moved != 0 {
		t.Fatalf("enabling again: %d rows moved, %v; want none", moved, err)
	}
	if due, breakers := state(); due || breakers != 1 {
		t.Errorf("after enabling an enabled destination: row due %v, %d breakers; want it put off and its breaker open", due, breakers)
	}
}

package routing_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/routing"
)

func apply(t *testing.T, db outboxd.DBTX, ob *testdb.Outbox, table *routing.Table) routing.Applied {
	t.Helper()
	a, err := ob.Routes().Apply(context.Background(), db, table, testdb.Actor)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Applying is idempotent, versioned by content, and what publish() uses
// is what Table.Match says, type for type: PostgreSQL's regular
// expressions and Go's read the patterns alike.
// (Mutations: apply_routes without its early return for the active digest
// fails this test at the second apply; Go's matcher reading * as .+ while
// publish() gets [^.]+ fails it at order.created.eu and a.b.b.c.)
func TestApplyIsIdempotentAndPublishMatchesLikeGo(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx := context.Background()
	if v, _, err := ob.Routes().Active(ctx, pool); err != nil || v != 0 {
		t.Fatalf("Active before any apply: %d %v, want 0", v, err)
	}
	routes := map[string]any{
		"one":  map[string]any{"events": []any{"order.*"}, "to": []any{"partner"}},
		"any":  map[string]any{"events": []any{"order.**", "x-y_z.*"}, "to": []any{"custom"}},
		"mid":  map[string]any{"events": []any{"a.*.c"}, "to": []any{"partner", "custom"}},
		"deep": map[string]any{"events": []any{"a.**.c"}, "to": []any{"custom"}},
	}
	table := compile(t, routes, routing.UnmatchedDrop)
	first := apply(t, pool, ob, table)
	if !first.Changed || first.Version == 0 {
		t.Fatalf("first apply: %+v, want a new version", first)
	}
	if again := apply(t, pool, ob, table); again != (routing.Applied{Version: first.Version}) {
		t.Fatalf("second apply: %+v, want version %d unchanged", again, first.Version)
	}
	if v, digest, err := ob.Routes().Active(ctx, pool); err != nil || v != first.Version || digest != table.Digest() {
		t.Fatalf("Active: %d %s %v, want version %d with the table's digest", v, digest, err, first.Version)
	}
	for i, typ := range []string{"order.created", "order", "order.created.eu", "orders.created", "x-y_z.q", "a.b.c", "a.c", "a.b.b.c", "a.b.cd", "b"} {
		published, err := ob.Publish(ctx, pool, outboxd.Event{Type: typ, Key: "k" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range published {
			got = append(got, p.Sink)
		}
		if want := table.Match(typ); !slices.Equal(got, want) {
			t.Errorf("publish(%s) went to %v, Table.Match says %v", typ, got, want)
		}
	}
}

// A new version takes over at once, the types seen under the old one
// resolved already; applying the old routes again brings their version
// back; a removed route's target stays findable for rows still on their
// way, and the active version's wins.
// (Mutations: apply_routes updating routes_active only when none is set
// fails this test: publish keeps the old route; applied_target.sql reading
// the active version only fails it: the removed route's target is gone.)
func TestNewRoutesTakeOverAndOldTargetsStayFindable(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx := context.Background()
	old := compile(t, map[string]any{"orders": map[string]any{"events": []any{"order.*"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{"line": "old {{.key}}"}}}}}, "")
	v1 := apply(t, pool, ob, old)
	if _, err := ob.Publish(ctx, pool, outboxd.Event{Type: "order.created", Key: "1"}); err != nil {
		t.Fatal(err)
	}
	renamed := compile(t, map[string]any{"sales": map[string]any{"events": []any{"order.*"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{"line": "new {{.key}}"}}}}}, "")
	v2 := apply(t, pool, ob, renamed)
	if !v2.Changed || v2.Version <= v1.Version {
		t.Fatalf("apply of new routes: %+v after %+v", v2, v1)
	}
	var resolved []string
	rows, err := pool.Query(ctx, "SELECT version || ' ' || event_type || ' ' || array_to_string(routes, ',') FROM "+ob.Schema()+".route_matches")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		resolved = append(resolved, s)
	}
	if want := []string{strconv.FormatInt(v2.Version, 10) + " order.created sales"}; !slices.Equal(resolved, want) {
		t.Errorf("route_matches after the apply: %v, want %v", resolved, want)
	}
	published, err := ob.Publish(ctx, pool, outboxd.Event{Type: "order.created", Key: "1"})
	if err != nil || len(published) != 1 || !published[0].Created {
		t.Fatalf("publish under the new routes: %v %v, want a new row for route sales", published, err)
	}
	fb := ob.Routes().Fallback(pool)
	if st, err := fb.Target(ctx, "orders", "custom"); err != nil || st.Template["line"] != "old {{.key}}" {
		t.Errorf("the removed route's target: %v %v", st, err)
	}
	if _, err := fb.Target(ctx, "nothing", "custom"); !errors.Is(err, routing.ErrNoTarget) {
		t.Errorf("a target never applied: %v, want ErrNoTarget", err)
	}
	if back := apply(t, pool, ob, old); back != (routing.Applied{Version: v1.Version, Changed: true}) {
		t.Errorf("applying the old routes again: %+v, want version %d back", back, v1.Version)
	}
}

// A template's thread_key is evaluated by publish() from the event.
func TestThreadKeyTemplateIsEvaluatedWhenPublished(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx := context.Background()
	apply(t, pool, ob, compile(t, map[string]any{"incidents": map[string]any{"events": []any{"incident.*"}, "to": []any{
		map[string]any{"sink": "custom", "template": map[string]any{"thread_key": "{{.type}}/{{.data.service.name}}#{{.key}}"}},
		"partner"}}}, ""))
	if _, err := ob.Publish(ctx, pool, outboxd.Event{Type: "incident.opened", Key: "7", ThreadKey: "inc-7",
		Data: map[string]any{"service": map[string]any{"name": "db"}}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	rows, err := pool.Query(ctx, "SELECT sink, thread_key || ' ' || ordering_key FROM "+ob.Schema()+".messages")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var sink, keys string
		if err := rows.Scan(&sink, &keys); err != nil {
			t.Fatal(err)
		}
		got[sink] = keys
	}
	if got["custom"] != "incident.opened/db#7 custom/incident.opened/db#7" || got["partner"] != "inc-7 partner/inc-7" {
		t.Errorf("thread and ordering keys: %v", got)
	}
	_, err = ob.Publish(ctx, pool, outboxd.Event{Type: "incident.opened", Key: "8", Data: map[string]any{}})
	if !errors.Is(err, outboxd.ErrInvalidEvent) || !strings.Contains(err.Error(), "route incidents takes its thread_key from .data.service.name, which the event lacks") {
		t.Errorf("publish without the thread key's field: %v", err)
	}
}

// concurrentApplies is how many applies race in the isolation test.
const concurrentApplies = 3

// Applies that queued behind another apply's lock on the active version
// see what it committed, whatever the database's default isolation: every
// one succeeds and finds the routes already active. The applies are made to
// queue behind a transaction of the test that applies the same routes.
// (Mutation: Apply calling ApplyRoutes on db as it is, in the database's
// default isolation, fails under both with SQLSTATE 40001 could not
// serialize access due to concurrent update.)
func TestConcurrentApplyUnderAnyDefaultIsolation(t *testing.T) {
	t.Parallel()
	testdb.UnderStricterIsolations(t, concurrentApplies+2, func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, isolation string) {
		ob := testdb.NewSchema(t, pool)
		table := compile(t, orders(), routing.UnmatchedDrop)
		holder, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = holder.Rollback(ctx) }()
		first := apply(t, holder, ob, table)
		errs := make(chan error, concurrentApplies)
		for range concurrentApplies {
			go func() {
				a, err := ob.Routes().Apply(ctx, pool, table, testdb.Actor)
				if err == nil && a != (routing.Applied{Version: first.Version}) {
					err = fmt.Errorf("applied %+v, want version %d unchanged", a, first.Version)
				}
				errs <- err
			}()
		}
		testdb.WaitForLockWaiters(ctx, t, pool, concurrentApplies)
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		for range concurrentApplies {
			if err := <-errs; err != nil {
				t.Errorf("a concurrent apply under %s: %v", isolation, err)
			}
		}
	})
}

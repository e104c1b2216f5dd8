package operator_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// exampleOutbox migrates an outbox in schema for an example and returns a
// pool on it, the outbox's producer and operator APIs, and a cleanup that
// drops the schema and closes the pool.
func exampleOutbox(ctx context.Context, schema string) (*pgxpool.Pool, *outboxd.Outbox, *operator.Operator, func()) {
	pool, err := pgxpool.New(ctx, testdb.URL())
	if err != nil {
		panic(err)
	}
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := ob.Migrator().Migrate(ctx, pool); err != nil {
		panic(err)
	}
	return pool, ob, ob.Operator(), func() {
		_, _ = pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		pool.Close()
	}
}

// A dry run says how many dead letters an action would touch, and the
// largest id it counted; passing that id back acts on exactly those rows.
// Ids that name no dead letter are reported, not silently skipped.
func ExampleOperator_Redrive() {
	ctx := context.Background()
	pool, _, ops, cleanup := exampleOutbox(ctx, "example_redrive")
	defer cleanup()
	// Two dead letters, as a relay would leave them.
	if _, err := pool.Exec(ctx, `INSERT INTO example_redrive.messages (sink, dedup_key, payload, status, attempts, last_error)
		VALUES ('partner', 'a', '{}', 'dead', 3, '503 Service Unavailable'), ('partner', 'b', '{}', 'dead', 3, '400 Bad Request')`); err != nil {
		panic(err)
	}
	sel := operator.RedriveFilter{All: true, Sink: "partner", ErrorContains: "unavailable", DryRun: true}
	plan, err := ops.Redrive(ctx, pool, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}, sel)
	if err != nil {
		panic(err)
	}
	fmt.Println("would redrive", plan.Rows)
	sel.DryRun, sel.Token = false, plan.Token // exactly the rows counted
	done, err := ops.Redrive(ctx, pool, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}, sel)
	if err != nil {
		panic(err)
	}
	fmt.Println("redriven", done.Rows)
	res, err := ops.Purge(ctx, pool, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}, operator.RedriveFilter{IDs: []int64{999999}})
	if err != nil {
		panic(err)
	}
	fmt.Println("purged", res.Rows, "missing", res.Missing)
	// Output:
	// would redrive 1
	// redriven 1
	// purged 0 missing [999999]
}

// An operator pauses a sink for every relay of the cluster, with who and
// why, and resumes it.
func ExampleOperator_PauseSink() {
	ctx := context.Background()
	pool, _, ops, cleanup := exampleOutbox(ctx, "example_pause")
	defer cleanup()
	until, err := ops.PauseSink(ctx, pool, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}, "partner", operator.Pause{For: time.Hour, By: "alice", Reason: "partner maintenance"})
	if err != nil {
		panic(err)
	}
	fmt.Println("paused for about an hour:", time.Until(until).Round(time.Hour))
	states, err := ops.SinkStates(ctx, pool)
	if err != nil {
		panic(err)
	}
	s := states["partner"]
	fmt.Println(s.Paused(), s.ByHand, s.ChangedBy, s.ChangeReason)
	res, err := ops.ResumeSink(ctx, pool, audit.Actor{Name: "alice", Role: "operate", Source: "cli"}, "partner", "bob", "maintenance over")
	if err != nil {
		panic(err)
	}
	states, _ = ops.SinkStates(ctx, pool)
	fmt.Println(res.WasPaused, states["partner"].Paused(), states["partner"].ChangedBy)
	// Output:
	// paused for about an hour: 1h0m0s
	// true true alice partner maintenance
	// true false bob
}

// The overview reads the cluster's stats snapshot (a relay recomputes it
// every few seconds; here, with no relay, it is done by hand), the
// delivery rates and the pauses: a few small tables, never the messages.
func ExampleOperator_Overview() {
	ctx := context.Background()
	pool, ob, ops, cleanup := exampleOutbox(ctx, "example_overview")
	defer cleanup()
	for _, key := range []string{"a", "b"} {
		if _, err := ob.Enqueue(ctx, pool, outboxd.Message{Sink: "partner", DedupKey: key, Payload: "x"}); err != nil {
			panic(err)
		}
	}
	if err := ops.RefreshStatsSnapshot(ctx, pool, "example"); err != nil {
		panic(err)
	}
	ov, err := ops.Overview(ctx, pool, 0)
	if err != nil {
		panic(err)
	}
	for _, s := range ov.Sinks {
		fmt.Println(s.Sink, "pending", s.Counts.Pending, "paused", s.State.Paused())
	}
	// Output:
	// partner pending 2 paused false
}

// Every action records who did it in the audit trail, in the action's own
// transaction; a listing shows the newest first.
func ExampleOperator_Audit() {
	ctx := context.Background()
	pool, _, ops, done := exampleOutbox(ctx, "example_audit")
	defer done()
	alice := audit.Actor{Name: "alice", Role: "operate", Source: "192.0.2.10"}
	if _, err := ops.PauseSink(ctx, pool, alice, "partner", operator.Pause{For: time.Hour, Reason: "partner maintenance"}); err != nil {
		panic(err)
	}
	since, err := audit.ParseSince("24h", time.Now())
	if err != nil {
		panic(err)
	}
	entries, err := ops.Audit().List(ctx, pool, audit.Filter{Since: since})
	if err != nil {
		panic(err)
	}
	e := entries[0]
	fmt.Println(e.Actor, e.Role, e.Source, e.Action, e.Sink, e.Count)
	// Output:
	// alice operate 192.0.2.10 pause partner 1
}

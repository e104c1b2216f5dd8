package plans_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// snapshotParams are the parameter types of take_stats_snapshot.sql in
// their $n order: sent_window, by, big, big_every; snapshotArgs are the
// values the relays give them (core/operator's statsSentWindow,
// statsLargeBacklog and statsLargeBacklogEvery).
const (
	snapshotParams = "interval, text, bigint, interval"
	snapshotArgs   = "'1 hour', 'test', 100000, '5 minutes'"
)

// A large backlog whose count the snapshot keeps costs the snapshot
// nothing, however few rows the other sinks have: beside 300,000 older
// waiting rows of two sinks (150,000 each, counted a moment ago, so
// their counts are kept), the snapshot that counts an active sink's
// 2,000 rows reads at most 1.5 times the buffers it reads on a table
// holding only those 2,000, under the generic and the custom plan.
// Measured: 100 buffers alone, 118-121 beside (1.18-1.21x) under either
// plan. (Mutation: the count back in the snapshot's own lateral subquery,
// where the sink is unknown to the planner, fails this test: the planner
// expects a third of the table per sink and scans all of it, 10,446
// buffers, 127x.)
func TestStatsSnapshotBesideAKeptBacklogReadsOnlyTheSinksItCounts(t *testing.T) {
	pool := longCluster(t, "inserts 300,000 rows", 4)
	snapshots := twoOutboxes(t, pool,
		[]string{
			`INSERT INTO {s}.messages (sink, dedup_key, payload) SELECT 'active', 'a' || g, '{}' FROM generate_series(1, 2000) g`,
		},
		`INSERT INTO {s}.messages (sink, dedup_key, payload, available_at)
		 SELECT 'paused', 'p' || g, '{}', now() - interval '1 hour' FROM generate_series(1, 150000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload, available_at)
		 SELECT 'ghost', 'g' || g, '{}', now() - interval '1 hour' FROM generate_series(1, 150000) g`)
	for _, q := range snapshots {
		// The count every few minutes, which reads the backlog.
		if err := q.TakeStatsSnapshot(t.Context(), pool, time.Hour, "test", 100_000, 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		alone, _ := explainSnapshot(t, pool, snapshots[0], mode)
		beside, raw := explainSnapshot(t, pool, snapshots[1], mode)
		t.Logf("%s: the snapshot reads %d buffers alone, %d beside the kept backlog", mode, alone.buffers(), beside.buffers())
		if r := float64(beside.buffers()) / float64(alone.buffers()); r > 1.5 {
			t.Errorf("%s: the snapshot reads %d buffers beside a backlog whose counts it keeps, %.2fx the %d alone:\n%s",
				mode, beside.buffers(), r, alone.buffers(), raw)
		}
	}
}

// explainSnapshot runs take_stats_snapshot.sql under the plan mode given
// in a transaction it rolls back, and returns EXPLAIN (ANALYZE, BUFFERS)
// of it.
func explainSnapshot(t *testing.T, pool *pgxpool.Pool, q *store.Queries, mode string) (plan, string) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	return explainPrepared(t, tx, mode, snapshotParams, q.Texts().TakeStatsSnapshot, snapshotArgs)
}

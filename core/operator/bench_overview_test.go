package operator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Sizes of the overview benchmark's outbox: a day of delivered history
// (the default retention) and a backlog, as docs/performance.md reports.
const (
	overviewSentRows    = 1_000_000
	overviewBacklogRows = 100_000
	overviewDeadRows    = 2_000
)

// BenchmarkOverviewCost measures what the console and the gauges cost the
// database with 1M sent rows spread over the last 24 hours and a backlog
// of 100k rows (a tenth of them failed and retrying) over five sinks:
//
//   - snapshot: the statement one relay runs every few seconds to
//     recompute the cluster's counts (partial indexes and the last hour of
//     the sent index);
//   - overview: what every page view or live refresh reads (the snapshot,
//     the per-minute delivery counts and the pauses);
//   - stats-group-by: the exact count over the whole table that the gauges
//     ran every 15 s in every pod before, for comparison.
//
// With -v it logs the plans with EXPLAIN (ANALYZE, BUFFERS). Run it with
//
//	go test ./core/operator -run '^$' -bench OverviewCost -benchtime 20x -v
func BenchmarkOverviewCost(b *testing.B) {
	pool, ob := testdb.New(b)
	q, err := store.New(ob.Schema())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s := ob.Schema()
	for _, stmt := range []struct {
		sql  string
		rows int
	}{
		{`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, created_at, available_at, sent_at)
		 SELECT 'sink-' || (g % 5), 'h' || g, '{"order": 1}', 'sent', 1,
		        now() - interval '24 hours' + g * interval '86 ms', now() - interval '24 hours' + g * interval '86 ms',
		        now() - interval '24 hours' + g * interval '86 ms' + interval '40 ms'
		 FROM generate_series(1, $1::int) g`, overviewSentRows},
		{`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, last_error, created_at, available_at)
		 SELECT 'sink-' || (g % 5), 'b' || g, '{"order": 1}', CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'pending' END,
		        CASE WHEN g % 10 = 0 THEN 1 ELSE 0 END, CASE WHEN g % 10 = 0 THEN '503' END,
		        now() - g * interval '10 ms', now() - g * interval '10 ms'
		 FROM generate_series(1, $1::int) g`, overviewBacklogRows},
		{`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, last_error)
		 SELECT 'sink-' || (g % 5), 'd' || g, '{"order": 1}', 'dead', 10, '400 bad request' FROM generate_series(1, $1::int) g`, overviewDeadRows},
		// An hour of per-minute delivery counts and a paused sink, so the
		// overview reads what a busy cluster has.
		{`INSERT INTO {s}.delivery_minutes (sink, minute, sent, retried, dead, latency_buckets)
		  SELECT 'sink-' || k, date_trunc('minute', now()) - m * interval '1 minute', 700, 3, 1, array_fill(40::bigint, ARRAY[17])
		  FROM generate_series(0, 4) k, generate_series(0, $1::int - 1) m`, 60},
		{`INSERT INTO {s}.sink_limits (sink, paused_until, manual_until, changed_by, changed_at)
		  VALUES ('sink-1', now() + interval '1 hour', now() + interval '1 hour', 'bench', now())`, 0},
		{`VACUUM ANALYZE {s}.messages`, 0},
	} {
		var args []any
		if stmt.rows > 0 {
			args = []any{stmt.rows}
		}
		if _, err := pool.Exec(ctx, strings.ReplaceAll(stmt.sql, "{s}", s), args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := ob.RefreshStatsSnapshot(ctx, pool, "bench"); err != nil {
		b.Fatal(err)
	}
	explain := func(name, query string, args ...any) {
		rows, err := pool.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, args...)
		if err != nil {
			b.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				b.Fatal(err)
			}
			plan = append(plan, line)
		}
		b.Logf("%s:\n%s", name, strings.Join(plan, "\n"))
	}
	explain("snapshot", q.Texts().TakeStatsSnapshot, time.Hour, "bench")
	explain("overview: stats_snapshot", q.Texts().StatsSnapshot)
	explain("overview: delivery_rates", q.Texts().DeliveryRates, operator.DefaultRateWindow)
	explain("overview: sink_pauses", q.Texts().SinkPauses)
	explain("stats-group-by", q.Texts().Stats)

	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			if err := ob.RefreshStatsSnapshot(ctx, pool, "bench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("overview", func(b *testing.B) {
		for b.Loop() {
			ov, err := ob.Overview(ctx, pool, 0)
			if err != nil || len(ov.Sinks) != 5 || ov.Sinks[0].Counts.Pending == 0 {
				b.Fatalf("overview = %+v, %v", ov, err)
			}
		}
	})
	b.Run("stats-group-by", func(b *testing.B) {
		for b.Loop() {
			if _, err := ob.Stats(ctx, pool); err != nil {
				b.Fatal(err)
			}
		}
	})
	var sizes string
	if err := pool.QueryRow(ctx, `SELECT pg_size_pretty(pg_table_size('`+s+`.messages'))`).Scan(&sizes); err != nil {
		b.Fatal(err)
	}
	b.Logf("messages table: %s", sizes)
}

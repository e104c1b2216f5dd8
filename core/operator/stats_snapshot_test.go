package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// The overview flags a sink whose rows wait while nobody delivers them.
func TestOverviewListsSinksAndFlagsStalledOnes(t *testing.T) {
	b := coretest.Setup(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.messages (sink, dedup_key, payload, created_at)
		VALUES ('forgotten', 'a', '{}', now() - interval '10 minutes'), ('fresh', 'a', '{}', now())`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Outbox.PauseSink(b.Ctx, b.Pool, testdb.Actor, "quiet", operator.Pause{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	ov, err := b.Outbox.Overview(b.Ctx, b.Pool, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]operator.SinkOverview{}
	var names []string
	for _, s := range ov.Sinks {
		got[s.Sink] = s
		names = append(names, s.Sink)
	}
	if strings.Join(names, ",") != "forgotten,fresh,quiet" || time.Since(ov.TakenAt) > time.Minute || ov.Window != operator.DefaultRateWindow {
		t.Fatalf("overview = %+v", ov)
	}
	if !got["forgotten"].Stalled(ov.Window) || got["fresh"].Stalled(ov.Window) || got["quiet"].Stalled(ov.Window) {
		t.Errorf("stalled: forgotten %v, fresh %v, quiet %v; want only forgotten",
			got["forgotten"].Stalled(ov.Window), got["fresh"].Stalled(ov.Window), got["quiet"].Stalled(ov.Window))
	}
	if !got["quiet"].State.Paused() || got["forgotten"].Counts.OldestPendingAge < 9*time.Minute {
		t.Errorf("overview = %+v", ov.Sinks)
	}
}

// The snapshot of the counts reads the partial indexes and the last hour
// of sent rows: with a long delivered history it never scans the table.
// (Mutations, each failing this test: take_stats_snapshot.sql counting
// every sent row, not the last hour's; counting dead rows by status
// instead of the dead index's phase.)
func TestStatsSnapshotPlanSkipsHistory(t *testing.T) {
	b := coretest.Setup(t)
	for _, stmt := range []string{
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, sent_at, created_at)
		 SELECT 'hist', 'h' || g, '{}', 'sent', 1, now() - interval '3 hours', now() - interval '4 hours'
		 FROM generate_series(1, 200000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status, attempts, sent_at)
		 SELECT 'hist', 'r' || g, '{}', 'sent', 1, now() - (g || ' s')::interval FROM generate_series(1, 2000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload) SELECT 'work', 'w' || g, '{}' FROM generate_series(1, 50000) g`,
		`INSERT INTO {s}.messages (sink, dedup_key, payload, status) SELECT 'work', 'd' || g, '{}', 'dead' FROM generate_series(1, 100) g`,
		`ANALYZE {s}.messages`,
	} {
		if _, err := b.Pool.Exec(b.Ctx, strings.ReplaceAll(stmt, "{s}", b.Outbox.Schema())); err != nil {
			t.Fatal(err)
		}
	}
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	plan, raw := b.Explain(t, q.Texts().TakeStatsSnapshot, time.Hour, "test", int64(100_000), 5*time.Minute)
	indexes := map[string]bool{}
	plan.Walk(func(n coretest.PlanNode) {
		if n.NodeType == "Seq Scan" && n.Relation == "messages" {
			t.Errorf("the snapshot scans the whole messages table:\n%s", raw)
		}
		indexes[n.IndexName] = true
	})
	for _, want := range []string{"messages_open_idx", "messages_sent_idx", "messages_dead_idx"} {
		if !indexes[want] {
			t.Errorf("the snapshot does not use %s (uses %v):\n%s", want, indexes, raw)
		}
	}
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := snap.Sinks["hist"], snap.Sinks["work"]; h.SentLastHour != 2000 || w.Pending != 50000 || w.Dead != 100 {
		t.Errorf("snapshot = %+v", snap.Sinks)
	}
}

// A snapshot of an outbox without rows is a snapshot too: taken, with no
// sinks.
func TestStatsSnapshotOfAnEmptyOutbox(t *testing.T) {
	b := coretest.Setup(t)
	if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
		t.Fatal(err)
	}
	snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
	if err != nil || snap.TakenAt.IsZero() || snap.TakenBy != "test" || len(snap.Sinks) != 0 {
		t.Fatalf("snapshot = %+v, %v", snap, err)
	}
}

// A large backlog is not counted every few seconds: a sink with 100,000
// open rows or more at its last count keeps that count (the snapshot does
// not read its rows) for five minutes, or until a hundredth of it has been
// delivered; other sinks are counted each time. (Mutations, each failing
// this test: take_stats_snapshot.sql without the kept sinks, at the
// second snapshot; the kept sinks' counts not carried over, at the same
// point, big showing no pending row; the delivered hundredth ignored, at
// the third.)
func TestStatsSnapshotCountsALargeBacklogEveryFewMinutes(t *testing.T) {
	b := coretest.Setup(t)
	exec := func(stmt string) {
		t.Helper()
		if _, err := b.Pool.Exec(b.Ctx, strings.ReplaceAll(stmt, "{s}", b.Outbox.Schema())); err != nil {
			t.Fatal(err)
		}
	}
	add := func(sink string, from, to int) {
		t.Helper()
		exec(fmt.Sprintf(`INSERT INTO {s}.messages (sink, dedup_key, payload) SELECT '%s', 'k' || g, '{}' FROM generate_series(%d, %d) g`, sink, from, to))
	}
	pending := func(when string, wantBig, wantSmall int64) {
		t.Helper()
		if err := b.Outbox.RefreshStatsSnapshot(b.Ctx, b.Pool, "test"); err != nil {
			t.Fatal(err)
		}
		snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if big, small := snap.Sinks["big"], snap.Sinks["small"]; big.Pending != wantBig || small.Pending != wantSmall {
			t.Fatalf("%s: pending big %d, small %d; want %d, %d", when, big.Pending, small.Pending, wantBig, wantSmall)
		}
	}
	add("big", 1, 100_000)
	add("small", 1, 10)
	pending("first count", 100_000, 10)
	add("big", 100_001, 100_005)
	add("small", 11, 15)
	pending("a large backlog counted just now", 100_000, 15)
	exec(`INSERT INTO {s}.delivery_minutes (sink, minute, sent, retried, dead, latency_buckets)
	      VALUES ('big', date_trunc('minute', now()), 999, 0, 1, '{}')`)
	pending("a hundredth of it delivered since", 100_005, 15)
	add("big", 100_006, 100_010)
	exec(`DELETE FROM {s}.delivery_minutes`)
	pending("counted again just now", 100_005, 15)
	exec(`UPDATE {s}.sink_stats SET open_counted_at = now() - interval '5 minutes 1 second'`)
	pending("five minutes after its count", 100_010, 15)
}

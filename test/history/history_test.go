// Package history_test checks delivered history (migration 013) on a
// PostgreSQL cluster of the test's own, configured as production is
// (autovacuum on): the upgrade of a large outbox is online, and retention
// empties history by truncating partitions, not by deleting rows.
package history_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

const (
	// legacyRows is the size of the outbox upgraded: sent rows stored
	// before migration 013, in messages.
	legacyRows = 1_000_000
	// producers enqueue through enqueue() while the upgrade runs.
	producers = 4
	// maxStall bounds the longest enqueue while the migration runs: it
	// holds its locks for catalog changes only. Measured on a 2-core
	// machine shared with other work: see docs/performance.md.
	maxStall = 2 * time.Second
)

// stats collects what the producers saw.
type stats struct {
	mu        sync.Mutex
	maxStall  time.Duration
	calls     int
	refusedOK int
	errs      []error
}

func (s *stats) record(d time.Duration, err error, legacyRefused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.maxStall = max(s.maxStall, d)
	if err != nil {
		s.errs = append(s.errs, err)
	}
	if legacyRefused {
		s.refusedOK++
	}
}

// produce calls enqueue() in a loop until stop: each round a new key
// (created) and a key of the legacy rows (which must be refused). An
// accepted legacy key is an error: its dedup key was lost.
func produce(ctx context.Context, pool *pgxpool.Pool, worker int, stop *atomic.Bool, s *stats) {
	for i := 0; !stop.Load(); i++ {
		legacy := fmt.Sprintf("old-%d", (worker*7919+i*104729)%legacyRows+1)
		for _, key := range []string{fmt.Sprintf("new-%d-%d", worker, i), legacy} {
			start := time.Now()
			var created bool
			err := pool.QueryRow(ctx, "SELECT created FROM hist.enqueue('s', $1, '{\"n\": 1}')", key).Scan(&created)
			if err == nil && created == (key == legacy) {
				err = fmt.Errorf("enqueue %s: created %v", key, created)
			}
			s.record(time.Since(start), err, err == nil && key == legacy)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// TestMigrationIsOnlineForAMillionRows upgrades an outbox of 1,000,000
// delivered rows (stored as before migration 013) while producers keep
// enqueuing through enqueue(): no enqueue waits longer than maxStall, none
// fails, and no legacy dedup key is accepted again, neither during the
// migration nor while maintenance then moves the legacy rows to history in
// batches. Afterwards messages holds no delivered row and every row has
// its key.
//
// Mutation: dropping the NOT EXISTS probe of messages from enqueue() in
// 013 makes the legacy keys accepted again. Mutation: dropping the keyed
// CTE of prune_sent.sql loses the legacy keys once their rows moved.
func TestMigrationIsOnlineForAMillionRows(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million rows")
	}
	pg := pgcluster.Start(t)
	ctx := t.Context()
	pool := pg.Pool(producers + 4)
	ob, err := outboxd.New(pool, outboxd.Options{Schema: "hist"})
	if err != nil {
		t.Fatal(err)
	}
	m := ob.Migrator()
	if _, err := m.MigrateTo(ctx, pool, 12); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO hist.messages (sink, dedup_key, payload, status, attempts, sent_at, created_at)
		SELECT 's', 'old-' || g, jsonb_build_object('n', g, 'pad', repeat('x', 200)), 'sent', 1,
		       now() - interval '10 minutes' + g * interval '0.5 ms', now() - interval '10 minutes'
		FROM generate_series(1, $1::int) g`, legacyRows); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE hist.messages"); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var s stats
	var wg sync.WaitGroup
	for w := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(ctx, pool, w, &stop, &s)
		}()
	}
	testrelay.WaitFor(t, 10*time.Second, "the producers under way", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.calls > 100
	})
	begun := time.Now()
	if applied, err := m.MigrateTo(ctx, pool, 13); err != nil || len(applied) != 1 || applied[0] != 13 {
		t.Fatalf("migrate: applied %v, %v", applied, err)
	}
	took := time.Since(begun)
	s.mu.Lock()
	stalled, before := s.maxStall, s.calls
	s.mu.Unlock()
	t.Logf("migration 013 over %d rows took %s; longest enqueue meanwhile %s", legacyRows, took, stalled)
	if stalled > maxStall {
		t.Errorf("an enqueue waited %s during the migration, over %s", stalled, maxStall)
	}

	// The later migrations, which this build's relay needs (its claim
	// reads migration 017's column), are not what this test measures.
	if _, err := m.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate past 013: %v", err)
	}

	// Maintenance moves the legacy rows while the producers go on.
	moveStart := time.Now()
	testrelay.Run(t, pool, "hist", relay.Config{PollInterval: 20 * time.Millisecond, SentRetention: time.Hour,
		MaintenanceInterval: 100 * time.Millisecond, Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	testrelay.WaitFor(t, 5*time.Minute, "the legacy sent rows moved out of messages", func() bool {
		var left int
		err := pool.QueryRow(ctx, "SELECT count(*) FROM hist.messages WHERE phase = 'sent'").Scan(&left)
		return err == nil && left == 0
	})
	t.Logf("maintenance moved %d rows in %s", legacyRows, time.Since(moveStart))
	// A few more rounds after the move, on keys that now live in history.
	testrelay.WaitFor(t, time.Minute, "enqueues after the move", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.calls > before+2000
	})
	stop.Store(true)
	wg.Wait()
	if len(s.errs) > 0 {
		t.Fatalf("%d of %d enqueues failed or took a legacy key again; first: %v", len(s.errs), s.calls, errors.Join(s.errs[:min(3, len(s.errs))]...))
	}
	var rows, distinct, keys, hot int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM hist.messages_all), (SELECT count(DISTINCT (sink, dedup_key)) FROM hist.messages_all),
		(SELECT count(*) FROM hist.message_keys), (SELECT count(*) FROM hist.messages)`).Scan(&rows, &distinct, &keys, &hot); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d enqueues, %d legacy keys refused; %d rows, %d keys, %d left in messages", s.calls, s.refusedOK, rows, keys, hot)
	if rows != distinct || keys != rows {
		t.Fatalf("%d rows of %d distinct keys, %d keys: a key is duplicated or missing", rows, distinct, keys)
	}
}

// historySizes is one sample of the history tables.
type historySizes struct {
	historyBytes, keysBytes, rows int64
}

func sampleHistory(ctx context.Context, t *testing.T, pool *pgxpool.Pool) historySizes {
	t.Helper()
	var s historySizes
	err := pool.QueryRow(ctx, `SELECT
		(SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		 WHERE i.inhparent = 'ret.messages_history'::regclass),
		pg_total_relation_size('ret.message_keys'), (SELECT count(*) FROM ret.messages_history)`).Scan(&s.historyBytes, &s.keysBytes, &s.rows)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRetentionTruncatesHistoryPartitions delivers a steady load with a
// retention of a few seconds for six retentions: the history table, its
// indexes and the key table stop growing once the first slots expire,
// history's partitions never see a row deleted (retention truncates them
// and reuses them), and the hot table holds no delivered row.
//
// Mutation: history_truncate() deleting the partition's rows instead of
// truncating it fails the no-deletes check (115,300 rows deleted).
// Mutation: history_expiring() never finding a slot fails the reuse check
// (31 slots).
func TestRetentionTruncatesHistoryPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for half a minute")
	}
	const (
		retention = 4 * time.Second
		batch     = 100
		every     = 20 * time.Millisecond // about 5,000 messages a second at most
	)
	pg := pgcluster.New(t)
	// Autovacuum as production has it, its wake-up scaled as the
	// retention is (seconds for a day): the key table's deleted keys are
	// reclaimed as they would be over a day.
	pg.Configure("autovacuum_naptime = 1s")
	pg.Start()
	ctx := t.Context()
	pool := pg.Pool(6)
	ob, err := outboxd.New(pool, outboxd.Options{Schema: "ret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Migrator().Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	testrelay.Run(t, pool, "ret", relay.Config{PollInterval: 10 * time.Millisecond, SentRetention: retention,
		MaintenanceInterval: 200 * time.Millisecond, Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})

	var samples []historySizes
	sent := 0
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	nextSample := start
	for time.Since(start) < 6*retention {
		<-tick.C
		msgs := make([]outboxd.Message, batch)
		for i := range msgs {
			msgs[i] = outboxd.Message{Sink: "s", DedupKey: fmt.Sprintf("k-%d", sent+i), Payload: map[string]string{"pad": "0123456789abcdef"}}
		}
		if _, err := ob.EnqueueBatch(ctx, pool, msgs); err != nil {
			t.Fatal(err)
		}
		sent += batch
		if time.Now().After(nextSample) {
			samples = append(samples, sampleHistory(ctx, t, pool))
			nextSample = nextSample.Add(retention / 4)
		}
	}
	// Steady state: from two retentions on, history holds between one and
	// 1.25 retentions of rows (plus what maintenance has not caught up
	// with), so no sample may exceed the first steady one by much.
	steady := samples[len(samples)/3]
	var peak historySizes
	for _, s := range samples[len(samples)/3:] {
		peak.historyBytes = max(peak.historyBytes, s.historyBytes)
		peak.keysBytes = max(peak.keysBytes, s.keysBytes)
		peak.rows = max(peak.rows, s.rows)
	}
	t.Logf("%d enqueued in %s; at 2 retentions: %+v; peak after: %+v; last: %+v", sent, time.Since(start), steady, peak, samples[len(samples)-1])
	if peak.historyBytes > steady.historyBytes*2 || peak.rows > steady.rows*2 {
		t.Errorf("history grew after two retentions: %+v at first, peak %+v", steady, peak)
	}
	if peak.keysBytes > steady.keysBytes*2 {
		t.Errorf("the key table grew after two retentions: %d bytes at first, peak %d", steady.keysBytes, peak.keysBytes)
	}
	// Statistics reach pg_stat_user_tables a moment after each backend's
	// commits: once they count every row the finishes inserted, they count
	// every delete too.
	testrelay.WaitFor(t, time.Minute, "every message delivered and counted", func() bool {
		var inserted int
		err := pool.QueryRow(ctx, `SELECT COALESCE(sum(s.n_tup_ins), 0)::bigint FROM pg_stat_user_tables s
			WHERE s.schemaname = 'ret' AND s.relname LIKE 'messages_history_%'`).Scan(&inserted)
		return err == nil && inserted == sent
	})
	var deleted, slots, hotSent int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(sum(s.n_tup_del), 0)::bigint FROM pg_stat_user_tables s
		WHERE s.schemaname = 'ret' AND s.relname LIKE 'messages_history_%'`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ret.history_slots`).Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ret.messages WHERE phase = 'sent'`).Scan(&hotSent); err != nil {
		t.Fatal(err)
	}
	if deleted != 0 {
		t.Errorf("%d history rows deleted one by one; retention must truncate partitions", deleted)
	}
	// Truncated slots are reused: the ring stays near retention/width + 2
	// slots (6) instead of one per rotation (24 over the run).
	if slots > 8 {
		t.Errorf("%d history slots: expired slots are not reused", slots)
	}
	if hotSent != 0 {
		t.Errorf("%d delivered rows in the hot table", hotSent)
	}
}

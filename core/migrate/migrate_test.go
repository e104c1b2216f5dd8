package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// concurrentRuns is how many migrations race in the isolation test.
const concurrentRuns = 3

// Migrations that queued on the lock see what the first one committed,
// whatever the database's default isolation: every run succeeds and the
// migrations are applied once. The runs are made to wait on the lock (held
// by the test) before any of them can commit, so a run's snapshot, if taken
// by the lock statement, predates the winner's commit every time.
// (Mutation: Migrate beginning with pgx.BeginFunc, the database's default
// isolation, fails under both with 42P07 relation "messages" already
// exists.)
func TestConcurrentMigrateUnderAnyDefaultIsolation(t *testing.T) {
	t.Parallel()
	testdb.UnderStricterIsolations(t, concurrentRuns+2, func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, isolation string) {
		m := testdb.Open(t, "iso").Migrator
		holder := testdb.HoldMigrationLock(ctx, t, pool, "iso")
		type result struct {
			applied []int
			err     error
		}
		results := make(chan result, concurrentRuns)
		for range concurrentRuns {
			go func() {
				applied, err := m.Migrate(ctx, pool)
				results <- result{applied, err}
			}()
		}
		testdb.WaitForLockWaiters(ctx, t, pool, concurrentRuns)
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		appliedOnce := 0
		for range concurrentRuns {
			r := <-results
			if r.err != nil {
				t.Errorf("a concurrent migrate failed under %s: %v", isolation, r.err)
			} else if len(r.applied) > 0 {
				appliedOnce++
			}
		}
		if appliedOnce != 1 {
			t.Errorf("%d runs applied migrations, want exactly 1", appliedOnce)
		}
		if pending, err := m.Pending(ctx, pool); err != nil || len(pending) > 0 {
			t.Errorf("pending after the runs: %v %v, want none", pending, err)
		}
	})
}

// Migration 009 on a table that holds rows whose headers a relay cannot
// decode: the open one is dead-lettered with the relay's error, a sent one
// stays sent, both keep their headers' text in last_error, and the
// constraint, added NOT VALID, is validated after the commit; a write
// around enqueue() is then refused. (Mutations: 009 without its repair
// fails Migrate with 23514 at the validation; Migrate without
// ValidateConstraints leaves the constraint not validated.)
func TestMigration009RepairsAndValidatesHeaders(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := ob.Schema()
	// The schema as it was before 009, with rows written around enqueue().
	if _, err := pool.Exec(ctx, `SET search_path = `+schema+`;
		ALTER TABLE messages DROP CONSTRAINT messages_headers_check;
		DROP FUNCTION validate_constraints(); DROP FUNCTION dead_letter_undecodable_rows();
		DELETE FROM schema_migrations WHERE version = 9;
		INSERT INTO messages (sink, dedup_key, payload, headers, status, sent_at) VALUES
			('s', 'open-bad', '{}', '{"x-retries": 1}', 'pending', NULL),
			('s', 'sent-bad', '{}', '["a"]', 'sent', now()),
			('s', 'good', '{}', '{"traceparent": "x"}', 'pending', NULL);
		RESET search_path`); err != nil {
		t.Fatal(err)
	}
	applied, err := ob.Migrate(ctx, pool)
	if err != nil || len(applied) != 1 || applied[0] != 9 {
		t.Fatalf("Migrate: %v %v, want migration 9 applied", applied, err)
	}
	rows, err := pool.Query(ctx, "SELECT dedup_key, status, headers::text, coalesce(last_error, '') FROM "+schema+".messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ key, status, headers, lastError string }
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var g row
		return g, r.Scan(&g.key, &g.status, &g.headers, &g.lastError)
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("rows %v, %v; want 3", got, err)
	}
	want := []struct{ status, headers, errPart string }{
		{"dead", "{}", `headers {"x-retries": 1} are not a JSON object of strings`},
		{"sent", "{}", `headers ["a"] are not a JSON object of strings`},
		{"pending", `{"traceparent": "x"}`, ""},
	}
	for i, w := range want {
		g := got[i]
		if g.status != w.status || g.headers != w.headers || !strings.Contains(g.lastError, w.errPart) || (w.errPart == "") != (g.lastError == "") {
			t.Errorf("%s: %s, headers %s, last error %q; want %s, headers %s, an error with %q", g.key, g.status, g.headers, g.lastError, w.status, w.headers, w.errPart)
		}
	}
	var validated bool
	if err := pool.QueryRow(ctx, "SELECT convalidated FROM pg_constraint WHERE conname = 'messages_headers_check' AND connamespace = $1::regnamespace", schema).Scan(&validated); err != nil || !validated {
		t.Errorf("messages_headers_check validated: %v (%v), want true", validated, err)
	}
	_, err = pool.Exec(ctx, "INSERT INTO "+schema+`.messages (sink, dedup_key, payload, headers) VALUES ('s', 'later', '{}', '{"n": 1}')`)
	if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != "messages_headers_check" {
		t.Errorf("a direct insert of headers {\"n\": 1}: %v, want SQLSTATE 23514 naming messages_headers_check", err)
	}
}

// A migration that applies versions records itself in the audit trail,
// in the transaction that writes the ledger, once the trail's own
// migration is among them; a run with nothing to apply records nothing.
// (Mutation: MigrateAs without its trail.Write fails this test.)
func TestMigrateRecordsItselfInTheAuditTrail(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t, 2)
	ctx := t.Context()
	schema := fmt.Sprintf("audit_migrate_%d", time.Now().UnixNano())
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	ob := testdb.Open(t, schema)
	m := ob.Migrator
	bob := audit.Actor{Name: "bob@host", Role: "admin", Source: audit.SourceCLI}
	applied, err := m.MigrateAs(ctx, pool, bob)
	if err != nil || len(applied) == 0 {
		t.Fatalf("migrate: %v %v", applied, err)
	}
	if _, err := m.MigrateAs(ctx, pool, bob); err != nil {
		t.Fatal(err)
	}
	entries, err := ob.Audit().List(ctx, pool, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Action != audit.ActionMigrate || entries[0].Actor != "bob@host" || entries[0].Count != int64(len(applied)) ||
		!strings.Contains(string(entries[0].Detail), "14") {
		t.Fatalf("audit entries: %+v; want bob's one migration of %v", entries, applied)
	}
}

// The queue table is vacuumed unthrottled, vacuumed and analyzed once 2 %
// of it changed, and never truncated by vacuum (migration 023): with the
// server's defaults, a sustained overload left millions of dead rows in
// the claims' path and the table unanalyzed for minutes
// (docs/performance.md). (Mutation: without migration 023 this test
// fails.)
func TestQueueTableIsVacuumedToKeepUp(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	var options []string
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = ($1 || '.messages')::regclass`, ob.Schema()).Scan(&options); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"autovacuum_vacuum_cost_delay=0", "autovacuum_vacuum_scale_factor=0.02", "autovacuum_analyze_scale_factor=0.02", "vacuum_truncate=false"} {
		if !slices.Contains(options, want) {
			t.Errorf("messages has options %v, want %s among them", options, want)
		}
	}
}

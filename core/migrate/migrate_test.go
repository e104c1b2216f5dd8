package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/migrate"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testdb"
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
	for _, isolation := range []string{"repeatable read", "serializable"} {
		t.Run(isolation, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg, err := pgxpool.ParseConfig(testdb.DatabaseWithIsolation(t, isolation))
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = concurrentRuns + 2
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			var level string
			if err := pool.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level); err != nil || level != isolation {
				t.Fatalf("the test database's isolation is %q (%v), want %q", level, err, isolation)
			}
			m, err := migrate.New("iso")
			if err != nil {
				t.Fatal(err)
			}
			q, err := store.New("iso")
			if err != nil {
				t.Fatal(err)
			}
			holder, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = holder.Rollback(ctx) }()
			if err := q.LockTransaction(ctx, holder, store.AdvisoryLockNamespace, q.Schema, store.LockKeyMigrate); err != nil {
				t.Fatal(err)
			}
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
}

package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testdb"
)

// TestConcurrentMigrateUnderRepeatableRead runs two `outboxd migrate` at
// once, with routes, on a database whose default isolation is REPEATABLE
// READ; both queue behind the migration lock (held by the test) before
// either can commit. Both succeed.
// (Mutation: Migrate beginning with pgx.BeginFunc, the database's default
// isolation, makes one exit 1 with 42P07 relation "messages" already
// exists.)
func TestConcurrentMigrateUnderRepeatableRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.DatabaseWithIsolation(t, "repeatable read")
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "routes:\n  orders:\n    events: [order.*]\n    to: [partner]\n")
	e.useDatabase(url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q, err := store.New(e.schema)
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
	type run struct {
		out, errOut string
		code        int
	}
	runs := make(chan run, 2)
	for range 2 {
		go func() {
			out, errOut, code := e.run(nil, "migrate")
			runs <- run{out, errOut, code}
		}()
	}
	testdb.WaitForLockWaiters(ctx, t, pool, 2)
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-runs
		if r.code != 0 {
			t.Errorf("a concurrent migrate exited %d\nstdout: %s\nstderr: %s", r.code, r.out, r.errOut)
		}
	}
}

// useDatabase points the env's configuration at the database of url
// instead of the shared test database. The schema is dropped with the
// database.
func (e *env) useDatabase(url string) {
	e.t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(cfg), "url: "+testdb.URL(), "url: "+url, 1)), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

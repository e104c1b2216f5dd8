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

// TestUndecodableRowBesideGoodOnes: `outboxd serve` over one row whose
// headers are not a JSON object of strings (inserted directly, the
// table's constraint dropped as on a schema from before migration 009)
// beside three good rows of another sink and two of its own: the good rows
// are delivered once each and the bad one is dead at its first attempt.
// With the constraint, such an insert is refused. (Mutation: claimRows
// returning the decoding error for the whole claim delivers nothing.)
func TestUndecodableRowBesideGoodOnes(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("a", rcv)+webhookSink("b", rcv), "")
	e.mustRun("migrate")
	ctx := context.Background()
	insert := "INSERT INTO " + e.schema + `.messages (sink, dedup_key, payload, headers) VALUES ('a', 'bad', '{}', '{"x-retries": 1}')`
	if _, err := e.pool.Exec(ctx, insert); err == nil || !strings.Contains(err.Error(), "messages_headers_check") {
		t.Fatalf("a direct insert of undecodable headers: %v, want it refused by messages_headers_check", err)
	}
	if _, err := e.pool.Exec(ctx, "ALTER TABLE "+e.schema+".messages DROP CONSTRAINT messages_headers_check"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, insert); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a a1", "a a2", "b b1", "b b2", "b b3"} {
		sink, key, _ := strings.Cut(m, " ")
		e.mustRun("enqueue", "--sink", sink, "--key", key, "--payload", `{"n": 1}`)
	}
	e.serve()
	eventually(t, time.Minute, "the good rows sent and the bad one dead", func() bool {
		s := e.stats()
		return s["a"]["sent"] == 2 && s["a"]["dead"] == 1 && s["b"]["sent"] == 3
	})
	if distinct, total := rcv.received(); distinct != 5 || total != 5 {
		t.Errorf("received %d distinct messages in %d deliveries, want 5 once each", distinct, total)
	}
	var attempts int
	var lastError string
	if err := e.pool.QueryRow(ctx, "SELECT attempts, last_error FROM "+e.schema+".messages WHERE dedup_key = 'bad'").Scan(&attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || !strings.Contains(lastError, "are not a JSON object of strings") {
		t.Errorf("the bad row: %d attempts, last error %q; want 1 and the headers named", attempts, lastError)
	}
}

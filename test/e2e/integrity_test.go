package e2e_test

import (
	"context"
	"os"
	"regexp"
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

// TestPhantomPauseIsRefusedAndForgettable: `outboxd sinks pause nosuch`
// (a name neither configured nor with messages) exits 2 and pauses
// nothing; with --force it pauses, `stats` shows the pause, and `sinks
// forget nosuch` removes it (exit 1 the second time, exit 2 for a
// configured sink). (Mutation: sinks pause without its CheckSinkKnown exits
// 0 for nosuch.)
func TestPhantomPauseIsRefusedAndForgettable(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "")
	e.mustRun("migrate")
	if out, errOut, code := e.run(nil, "sinks", "pause", "nosuch"); code != 2 || !strings.Contains(errOut, `"nosuch" is not configured and has no messages`) {
		t.Fatalf("sinks pause nosuch: exit %d\nstdout: %s\nstderr: %s\nwant exit 2 naming the sink", code, out, errOut)
	}
	if out := e.mustRun("stats"); strings.Contains(out, "nosuch") {
		t.Fatalf("the refused pause shows in stats:\n%s", out)
	}
	if out := e.mustRun("sinks", "pause", "nosuch", "--force", "--by", "ops"); out != "paused nosuch until resumed\n" {
		t.Fatalf("forced pause: %q", out)
	}
	e.mustRun("sinks", "pause", "partner", "--for", "1h")
	out := e.mustRun("stats")
	if !regexp.MustCompile(`(?m)^nosuch .*not configured on this relay; paused until resumed, by ops$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^partner .*paused until \S+, by `).MatchString(out) {
		t.Fatalf("stats lacks the pauses:\n%s", out)
	}
	if out, errOut, code := e.run(nil, "sinks", "forget", "partner"); code != 2 {
		t.Errorf("sinks forget partner (configured): exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if out := e.mustRun("sinks", "forget", "nosuch"); out != "forgot nosuch (its pause ended)\n" {
		t.Errorf("forget: %q", out)
	}
	if _, _, code := e.run(nil, "sinks", "forget", "nosuch"); code != 1 {
		t.Errorf("second forget: exit %d, want 1", code)
	}
	if out := e.mustRun("stats"); strings.Contains(out, "nosuch") {
		t.Errorf("nosuch still in stats after forget:\n%s", out)
	}
}

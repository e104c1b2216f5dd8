package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testdb"
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
	rcv := newReceiver(t)
	e := newEnv(t, webhookSink("partner", rcv), "routes:\n  orders:\n    events: [order.*]\n    to: [partner]\n")
	pool := testdb.PoolWithIsolation(t, "repeatable read", 2)
	e.useDatabase(pool.Config().ConnString())
	holder := testdb.HoldMigrationLock(ctx, t, pool, e.schema)
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
func (e *env) useDatabase(url string) { e.editConfig("url: "+testdb.URL(), "url: "+url) }

// editConfig replaces the first old in the env's configuration file with
// new, failing the test when there is none.
func (e *env) editConfig(old, new string) {
	e.t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(cfg), old) {
		e.t.Fatalf("the configuration has no %q", old)
	}
	if err := os.WriteFile(e.config, []byte(strings.Replace(string(cfg), old, new, 1)), 0o600); err != nil {
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
		return s["a"]["sent_last_hour"] == 2 && s["a"]["dead"] == 1 && s["b"]["sent_last_hour"] == 3
	})
	if distinct, total := rcv.received(); distinct != 5 || total != 5 {
		t.Errorf("received %d distinct messages in %d deliveries, want 5 once each", distinct, total)
	}
	var attempts int
	var lastError string
	if err := e.pool.QueryRow(ctx, "SELECT attempts, last_error FROM "+e.schema+".messages_all WHERE dedup_key = 'bad'").Scan(&attempts, &lastError); err != nil {
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
	if out, errOut, code := e.run(nil, "sinks", "pause", "nosuch"); code != 2 || !strings.Contains(errOut, "no sink nosuch is configured and the outbox has no messages of it") {
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
	if !regexp.MustCompile(`(?m)^nosuch .*by hand \(ops\) until resumed\s+not configured on this relay\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^partner .*by hand \(.+\) until \S+`).MatchString(out) {
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

// slowClaimLease is the relays' lease in TestSlowClaimsDeliverOnce.
const slowClaimLease = 3 * time.Second

// receiverLatency is how long the receiver of TestSlowClaimsDeliverOnce
// takes to answer, like a real one: a delivery is still under way when
// the other relay claims again.
const receiverLatency = 500 * time.Millisecond

// TestSlowClaimsDeliverOnce runs two `outboxd serve` whose claims the test
// holds up past the lease twice: once after they leased their rows (it
// locks the claim loops' wake-up registrations, which a claim updates
// last when it changes them: with batch_size 1 every claim of a row is
// full and marks its waiting loop busy), a third starting as the lock
// goes, and once before (it locks a table the claim reads). Every message
// reaches the receiver once.
// (Mutation: the relay counting a lease from when the claim returned,
// time.Now() plus the configured lease, delivers rows twice.)
func TestSlowClaimsDeliverOnce(t *testing.T) {
	t.Parallel()
	const perPhase = 40
	rcv := newReceiver(t)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(receiverLatency)
		rcv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	e := newEnv(t, webhookSink("partner", &receiver{Server: slow}), "")
	e.editConfig("lease: 10s", "lease: "+slowClaimLease.String()+"\n  batch_size: 1")
	e.mustRun("migrate")
	e.serve()
	e.serve()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	eventually(t, time.Minute, "both relays registered", func() bool {
		var waiters int
		_ = e.pool.QueryRow(ctx, "SELECT count(*) FROM "+e.schema+".waiters").Scan(&waiters)
		return waiters >= 2
	})
	for phase, lock := range []string{
		"SELECT FROM " + e.schema + ".waiters FOR UPDATE",
		"LOCK TABLE " + e.schema + ".sink_limits IN ACCESS EXCLUSIVE MODE",
	} {
		holder, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Exec(ctx, lock); err != nil {
			t.Fatal(err)
		}
		for i := range perPhase {
			e.mustRun("enqueue", "--sink", "partner", "--key", fmt.Sprintf("p%d-%d", phase, i), "--payload", `{"n": 1}`)
		}
		eventually(t, time.Minute, "a claim held up past the lease", func() bool {
			var held int
			_ = e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- name: claim%'
				  AND clock_timestamp() - xact_start > $1::interval`, 3*slowClaimLease/2).Scan(&held)
			return held > 0
		})
		if err := holder.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if phase == 0 {
			e.serve() // claims at once whatever the database says is free
		}
		eventually(t, time.Minute, "the phase's messages delivered", func() bool {
			distinct, _ := rcv.received()
			return distinct == (phase+1)*perPhase
		})
	}
	eventually(t, time.Minute, "every row recorded as sent", func() bool {
		return e.stats()["partner"]["sent_last_hour"] == 2*perPhase
	})
	if distinct, total := rcv.received(); total != distinct {
		t.Fatalf("%d messages in %d deliveries: %d delivered twice", distinct, total, total-distinct)
	}
}

package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// slowClaimLease is the lease of the slow-claim test: its claims are held
// up for longer than that.
const slowClaimLease = 2 * time.Second

// slowClaimBatch is the slow-claim test's claim size, a quarter of its
// rows: the relays' first claims are full, so they mark their waiting
// registrations busy, which needs the registrations' lock.
const slowClaimBatch = 10

// preparedConns is the size of the pool whose connections all have the
// claim prepared.
const preparedConns = 6

// sinkLatency is how long the slow-claim test's sink takes per delivery,
// like a real receiver: a delivery is still under way when the other
// relay claims again.
const sinkLatency = 300 * time.Millisecond

// A claim held up for longer than the lease after it leased its rows (the
// test holds the claiming loops' wake-up registrations, which a claim
// updates last when it changes them: a full claim of slowClaimBatch rows
// marks a waiting loop busy) never has its rows delivered by two relays:
// the relay that claimed them finds their lease spent and hands them back,
// and the others, one of them started as the lock goes, deliver them. This
// already held on 23581da (the relay counted leases from before the
// claim); the test keeps it. (Mutations: begin without its check of the
// lease's budget delivers the held claims' rows twice; the relay counting
// the lease from when the claim returned, time.Now() plus the configured
// lease, delivers rows twice.)
func TestSlowClaimNeverHandsOutAnExpiredLease(t *testing.T) {
	b := coretest.Setup(t)
	const n = 40
	rec := coretest.NewRecordingSink()
	rec.Fail = func(*sink.Delivery) error {
		time.Sleep(sinkLatency)
		return nil
	}
	cfg := relay.Config{PollInterval: 20 * time.Millisecond, Lease: slowClaimLease,
		BatchSize: slowClaimBatch, Sinks: []relay.SinkConfig{{Name: "s", Sink: rec}}}
	signals := &relaysignal.Relay{}
	for range 2 {
		testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), cfg, signals)
	}
	testrelay.WaitFor(t, 30*time.Second, "both relays registered", func() bool {
		var waiters int
		_ = b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".waiters").Scan(&waiters)
		return waiters >= 2
	})
	holder, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(b.Ctx) }()
	if _, err := holder.Exec(b.Ctx, "SELECT FROM "+b.Outbox.Schema()+".waiters FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "s", n, nil)
	waitForHeldClaim(t, b)
	if err := holder.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	// A relay starting now claims at once whatever the database says is
	// free to claim.
	testrelay.RunWith(t, b.Pool, b.Outbox.Schema(), cfg, signals)
	signals.Written.Wait(t, time.Minute, "every row sent", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent") == n
	})
	seen := map[string]int{}
	for _, d := range rec.Snapshot() {
		seen[d.DedupKey]++
	}
	twice := 0
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	if twice > 0 || len(seen) != n {
		t.Fatalf("%d of %d rows delivered more than once (%d delivered)", twice, n, len(seen))
	}
}

// A claim held up for longer than the lease before it leases its rows (the
// test holds a table the claim reads, so the statement waits between its
// start and its first row) gives each row a lease from when it was leased:
// the relay delivers every row of that claim once, handing none back as
// spent. (On 23581da the leases were counted from the statement's start,
// all spent on arrival: the relay handed the 40 rows back and delivered
// them from a later claim. Mutations: claim.sql's lease from now(), or the
// relay's lease end from its clock before the claim plus the configured
// lease, each make it hand the rows back.)
func TestClaimHeldUpBeforeLeasingHandsOutFullLeases(t *testing.T) {
	b := coretest.Setup(t)
	const n = 40
	rec := coretest.NewRecordingSink()
	// Every connection of the relay's pool has the claim prepared before
	// the lock is taken, so the lock holds up the claim's own transaction.
	// A connection's first claim is otherwise prepared in a transaction of
	// its own, which the lock may hold up instead: the relay, counting from
	// before the prepare, then finds the leases too short and hands the
	// rows back (safe, but not what this test measures).
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinConns, cfg.MaxConns = preparedConns, preparedConns
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Prepare(ctx, q.Texts().Claim, q.Texts().Claim)
		return err
	}
	pool, err := pgxpool.NewWithConfig(b.Ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	testrelay.WaitFor(t, 30*time.Second, "every connection prepared", func() bool { return pool.Stat().TotalConns() == preparedConns })
	signals := testrelay.Run(t, pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Lease: slowClaimLease, Sinks: []relay.SinkConfig{{Name: "s", Sink: rec}}})
	signals.Idle.WaitCount(t, 30*time.Second, "a first claim", 1)
	holder, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(b.Ctx) }()
	if _, err := holder.Exec(b.Ctx, "LOCK TABLE "+b.Outbox.Schema()+".sink_limits IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "s", n, nil)
	waitForHeldClaim(t, b)
	if err := holder.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	signals.Written.Wait(t, time.Minute, "every row sent", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "sent") == n
	})
	if back := relaysignal.CountWritten(signals.Written.All(), "pending"); back > 0 {
		t.Fatalf("%d rows handed back as spent, want every row delivered from the held-up claim", back)
	}
	if got := len(rec.Snapshot()); got != n {
		t.Fatalf("%d deliveries, want %d", got, n)
	}
}

// waitForHeldClaim waits until a claim waiting for a lock has run for the
// lease and half again: leases counted from its start are over.
func waitForHeldClaim(t *testing.T, b coretest.Bundle) {
	t.Helper()
	testrelay.WaitFor(t, time.Minute, "a claim held up past the lease", func() bool {
		var held int
		_ = b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- name: claim%'
			  AND clock_timestamp() - xact_start > $1::interval`, 3*slowClaimLease/2).Scan(&held)
		return held > 0
	})
}

// lookoutLateBy is how much later than the late producer's transaction
// started the rows that move the claims' bound past it are made: more
// than the bound's margin (claimBoundMargin, 250 ms).
const lookoutLateBy = 400 * time.Millisecond

// A row that the claims' bounds pass over (a producer's transaction that
// started before rows already delivered and committed after them) is still
// delivered while full claims are slow: the loop then looks for such rows
// beside its claims (a lookout, sql/passed_over.sql) and starts its next
// claim of the sink at the row found. The test makes one full claim slow
// by holding a table every claim reads, as the entries a transaction held
// open keeps make it slow. (Mutations: the loop never starting a lookout
// never delivers the row; passed_over.sql finding nothing, the same; a
// lookout's row not starting the next claim, the same.)
func TestRowsBoundsPassOverAreFoundAsideWhileFullClaimsAreSlow(t *testing.T) {
	b := coretest.Setup(t)
	schema := b.Outbox.Schema()
	rec := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, schema, relay.Config{PollInterval: 50 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: rec}}})
	signals.Idle.WaitCount(t, 10*time.Second, "a first empty claim", 1)

	late, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = late.Rollback(b.Ctx) }()
	if _, err := b.Outbox.Enqueue(b.Ctx, late, outboxd.Message{Sink: "s", DedupKey: "late", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 10*time.Second, "the database clock past the late row by more than the margin", func() bool {
		var past bool
		err := late.QueryRow(b.Ctx, "SELECT clock_timestamp() - now() > $1::interval", lookoutLateBy).Scan(&past)
		return err == nil && past
	})
	b.EnqueueN(t, "s", 5, nil)
	signals.WaitWritten(t, 10*time.Second, "s", "sent", 5)

	holder, err := b.Pool.Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(b.Ctx) }()
	if _, err := holder.Exec(b.Ctx, "LOCK TABLE "+schema+".sink_limits IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 10*time.Second, "a claim held up for 100 ms", func() bool {
		var held int
		_ = b.Pool.QueryRow(b.Ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '-- name: claim%'
			  AND clock_timestamp() - query_start > interval '100 ms'`).Scan(&held)
		return held > 0
	})
	if err := holder.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(b.Ctx); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, 20*time.Second, "s", "sent", 6)
}

package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// An enqueue wakes one waiting loop that claims for its sink, not every
// relay: two idle relays (an hour-long poll, so only wake-ups move them)
// make about one claim per message between them. (Before migration 006
// every notification woke every relay: two claims per message, one of them
// empty. Mutation: wake() notifying every waiting loop fails this test.)
func TestEnqueueWakesOneWaitingLoop(t *testing.T) {
	b := coretest.Setup(t)
	counter := &statementCounter{marker: "-- name: claim"}
	cfg, err := pgxpool.ParseConfig(testdb.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 4
	sink := coretest.NewRecordingSink()
	relayCfg := relay.Config{PollInterval: time.Hour, Sinks: []relay.SinkConfig{{Name: "s", Sink: sink}}}
	signals := &relaysignal.Relay{}
	for range 2 {
		pool, err := pgxpool.NewWithConfig(b.Ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		testrelay.RunWith(t, pool, b.Outbox.Schema(), relayCfg, signals)
	}
	// Polls the registrations: they are the other relays' state, in the
	// database, not an event of one relay.
	testrelay.WaitFor(t, 10*time.Second, "both relays registered and waiting", func() bool {
		var waiting int
		err := b.Pool.QueryRow(b.Ctx, "SELECT count(*) FROM "+b.Outbox.Schema()+".waiters WHERE waiting").Scan(&waiting)
		return err == nil && waiting == 2
	})
	before := counter.n.Load()
	const n = 20
	for i := range n {
		if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, outboxd.Message{Sink: "s", DedupKey: fmt.Sprint(i), Payload: "x"}); err != nil {
			t.Fatal(err)
		}
		signals.WaitWritten(t, 10*time.Second, "s", "sent", i+1)
	}
	if got := len(sink.Snapshot()); got != n {
		t.Fatalf("%d deliveries of %d messages", got, n)
	}
	claims := counter.n.Load() - before
	t.Logf("%d claims for %d messages on two relays", claims, n)
	if claims > n+n/2 {
		t.Fatalf("%d claims for %d messages: wake-ups reach more than one relay", claims, n)
	}
}

// A claim that leaves its loop's registration as it was writes no new
// version of it, and one that finds less than half the registration's life
// left renews it. Under a transaction held open every version a claim
// wrote would stay, and claims and every producer's wake-up (a scan of
// waiters) would read them all: a version per claim, 500 a second at 2,000
// messages a second. (Mutations: the claim's update of the registration
// without its guard fails the first check; the guard without its renewal
// fails the second.)
func TestClaimsRewriteTheirRegistrationOnlyWhenItChanges(t *testing.T) {
	b := coretest.Setup(t)
	waiters := b.Outbox.Schema() + ".waiters"
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{PollInterval: 20 * time.Millisecond,
		Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	registration := func() (versions string, secondsLeft float64) {
		t.Helper()
		err := b.Pool.QueryRow(b.Ctx, `SELECT string_agg(ctid::text, ' ' ORDER BY id),
			min(extract(epoch FROM alive_until - now()))::float8 FROM `+waiters).Scan(&versions, &secondsLeft)
		if err != nil {
			t.Fatal(err)
		}
		return versions, secondsLeft
	}
	signals.Idle.WaitCount(t, 10*time.Second, "a first empty claim", 1)
	// A registration an hour from lapsing: no claim of this test renews it.
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+waiters+" SET alive_until = now() + interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	idle := len(signals.Idle.All())
	signals.Idle.WaitCount(t, 10*time.Second, "an empty claim after the update", idle+1)
	before, _ := registration()
	signals.Idle.WaitCount(t, 10*time.Second, "ten more empty claims", idle+11)
	if after, _ := registration(); after != before {
		t.Fatalf("ten empty claims of a waiting loop moved its registration from %s to %s: each wrote a new version", before, after)
	}
	if _, err := b.Pool.Exec(b.Ctx, "UPDATE "+waiters+" SET alive_until = now() + interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 10*time.Second, "the registration renewed", func() bool {
		_, left := registration()
		return left > 2
	})
}

package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/coretest"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
	"github.com/outboxd/outboxd/internal/testsignal"
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
	relayCfg := relay.Config{Schema: b.Outbox.Schema(), PollInterval: time.Hour, Sinks: []relay.SinkConfig{{Name: "s", Sink: sink}}}
	signals := &testsignal.Relay{}
	for range 2 {
		pool, err := pgxpool.NewWithConfig(b.Ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		testrelay.RunWith(t, pool, relayCfg, signals)
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
		if _, err := b.Outbox.Enqueue(b.Ctx, b.Pool, core.Message{Sink: "s", DedupKey: fmt.Sprint(i), Payload: "x"}); err != nil {
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

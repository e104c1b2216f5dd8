package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A row whose headers do not decode (a number where a string belongs,
// written around enqueue() into a table whose constraint is missing, as
// before migration 009) is dead-lettered alone, token-guarded, at its first
// attempt and with an error saying what is wrong; the other rows of its
// claim, of its sink and of another, are delivered once. (On 23581da the
// whole claim failed after it committed, every lease: nothing was ever
// delivered and the rows' attempts grew past max_attempts. Mutation:
// claimRows returning the decoding error for the claim again fails this
// test, no row is ever written.)
func TestUndecodableRowFailsOnlyItself(t *testing.T) {
	b := coretest.Setup(t)
	schema := b.Outbox.Schema()
	if _, err := b.Pool.Exec(b.Ctx, "ALTER TABLE "+schema+".messages DROP CONSTRAINT messages_headers_check"); err != nil {
		t.Fatal(err)
	}
	var bad int64
	if err := b.Pool.QueryRow(b.Ctx, "INSERT INTO "+schema+`.messages (sink, dedup_key, payload, headers)
		VALUES ('a', 'bad', '{}', '{"x-retries": 1}') RETURNING id`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	b.EnqueueN(t, "a", 3, nil)
	b.EnqueueN(t, "b", 3, nil)
	rec := coretest.NewRecordingSink()
	signals := testrelay.Run(t, b.Pool, schema, relay.Config{PollInterval: 20 * time.Millisecond, Lease: 3 * time.Second,
		Sinks: []relay.SinkConfig{{Name: "a", Sink: rec, MaxAttempts: 5}, {Name: "b", Sink: rec, MaxAttempts: 5}}})
	signals.Written.Wait(t, 30*time.Second, "every row finished", func(all []relaysignal.Outcome) bool {
		return relaysignal.CountWritten(all, "") == 7
	})
	if counts := b.StatusCounts(t); counts["sent"] != 6 || counts["dead"] != 1 {
		t.Fatalf("statuses %v, want 6 sent and the undecodable row dead", counts)
	}
	if n := len(rec.Snapshot()); n != 6 {
		t.Errorf("%d deliveries, want the 6 good rows once each", n)
	}
	var got, lastError string
	var attempts int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT status, attempts, last_error FROM "+schema+".messages WHERE id = $1", bad).
		Scan(&got, &attempts, &lastError); err != nil {
		t.Fatal(err)
	}
	if got != string(status.Dead) || attempts != 1 ||
		!strings.Contains(lastError, `headers {"x-retries": 1} are not a JSON object of strings`) {
		t.Errorf("the undecodable row: %s after %d attempts, last error %q; want dead at the first with the headers named",
			got, attempts, lastError)
	}
}

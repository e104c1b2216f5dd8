package discord_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/sinks/discord"
)

// relayDeadline bounds how long the test waits for deliveries: at the
// default rate (25 a minute) its rows took 17 s on a quiet machine.
const relayDeadline = 90 * time.Second

// The real relay delivers committed rows through the discord sink, at its
// default rate limit per webhook, to a fake Discord that holds Discord's
// bucket of 5 requests per 2 s: every row is posted once, none spends a
// second attempt (a 429 would be deferred, not counted), and each row
// records Discord's message id as its receipt. (Mutation: Deliver
// returning nil before SetReceipt fails the receipt check.)
func TestRelayDeliversThroughDiscord(t *testing.T) {
	t.Parallel()
	const rows = 8
	pool, ob := testdb.New(t)
	fake := newFake(t)
	s := newSink(t, "ops", fake.URL(), nil)
	signals := testrelay.Run(t, pool, ob.Schema(), relay.Config{
		Sinks:        []relay.SinkConfig{{Name: "ops", Type: discord.Type.Name, Sink: s}},
		PollInterval: 50 * time.Millisecond,
	})
	msgs := make([]outboxd.Message, rows)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: "ops", DedupKey: fmt.Sprintf("deploy-%d", i), Payload: fmt.Sprintf("deploy %d finished", i)}
	}
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}
	signals.WaitWritten(t, relayDeadline, "ops", "sent", rows)

	posted := map[string]string{} // content -> Discord message id
	for _, m := range fake.Messages() {
		if _, dup := posted[m.Content]; dup {
			t.Errorf("%q posted twice", m.Content)
		}
		posted[m.Content] = m.ID
	}
	if len(posted) != rows {
		t.Fatalf("%d distinct messages posted, want %d", len(posted), rows)
	}
	dbRows, err := pool.Query(t.Context(), "SELECT payload->>'text', attempts, COALESCE(receipt->>'id', '') FROM "+ob.Schema()+".messages_all WHERE sink = 'ops'")
	if err != nil {
		t.Fatal(err)
	}
	defer dbRows.Close()
	for dbRows.Next() {
		var text, id string
		var attempts int
		if err := dbRows.Scan(&text, &attempts, &id); err != nil {
			t.Fatal(err)
		}
		if attempts != 1 || id != posted[text] {
			t.Errorf("row %q: %d attempts, receipt id %q; want 1 attempt and Discord's message id %q", text, attempts, id, posted[text])
		}
	}
	if err := dbRows.Err(); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	t.Logf("%d rows in %s, %d requests", rows, reqs[len(reqs)-1].At.Sub(reqs[0].At).Round(time.Millisecond), len(reqs))
}

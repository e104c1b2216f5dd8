package slack_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// relayPoolSize keeps each relay's pool small: the database is shared by
// every test package.
const relayPoolSize = 3

// runRelay runs a relay over ob with the given sinks until the test ends,
// sending its test signals to signals (which several relays may share).
func runRelay(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, lease time.Duration, signals *relaysignal.Relay, sinks ...relay.SinkConfig) {
	t.Helper()
	runRoutedRelay(t, pool, ob, lease, signals, nil, sinks...)
}

// runRoutedRelay is runRelay with a stage that renders published rows
// (see routedSlack).
func runRoutedRelay(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, lease time.Duration, signals *relaysignal.Relay, stage relay.Stage, sinks ...relay.SinkConfig) {
	t.Helper()
	testrelay.RunWith(t, pool, ob.Schema(), relay.Config{Sinks: sinks, Stage: stage, Lease: lease, PollInterval: 100 * time.Millisecond}, signals)
}

// enqueueTexts enqueues n plain-text messages for sink and returns their ids.
func enqueueTexts(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, sink string, n int) []int64 {
	t.Helper()
	msgs := make([]outboxd.Message, n)
	for i := range msgs {
		msgs[i] = outboxd.Message{Sink: sink, DedupKey: fmt.Sprintf("msg-%03d", i), Payload: fmt.Sprintf("message %d", i)}
	}
	res, err := ob.EnqueueBatch(context.Background(), pool, msgs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	ids := make([]int64, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// rowState is a row's status and Slack receipt.
type rowState struct {
	Status, Channel, TS string
	Attempts            int
}

func readRow(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, id int64) rowState {
	t.Helper()
	var r rowState
	err := pool.QueryRow(context.Background(),
		"SELECT status, COALESCE(receipt->>'channel', ''), COALESCE(receipt->>'ts', ''), attempts FROM "+ob.Schema()+".messages_all WHERE id = $1",
		id).Scan(&r.Status, &r.Channel, &r.TS, &r.Attempts)
	if err != nil {
		t.Fatalf("read row %d: %v", id, err)
	}
	return r
}

// sentCount counts sink's sent rows.
func sentCount(t *testing.T, pool *pgxpool.Pool, ob *testdb.Outbox, sink string) int64 {
	t.Helper()
	stats, err := ob.Stats(context.Background(), pool)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return stats[sink].Sent
}

package maintenance_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
)

// History takes the sent rows past retention out of the outbox, moves the
// recent ones to messages_history (migration 013) and leaves dead rows
// alone, in one round, on the leading relay.
//
// Mutation checked: keep without its PruneSent fails this test (the first
// round reports 0 rows, and the old rows stay).
func TestHistoryTakesOldSentRowsOutOnly(t *testing.T) {
	b, env := setup(t)
	_, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.messages (sink, dedup_key, payload, status, sent_at)
		SELECT 's', 'old' || g, '{}'::jsonb, 'sent', now() - interval '2 hours' FROM generate_series(1, 12000) g
		UNION ALL SELECT 's', 'recent', '{}', 'sent', now()
		UNION ALL SELECT 's', 'dead', '{}', 'dead', NULL`)
	if err != nil {
		t.Fatal(err)
	}
	leader := maintenance.NewLeader(env, "relay", leaseRound)
	start(t, b.Ctx, leader)
	start(t, b.Ctx, maintenance.NewHistory(env, leader, time.Minute, time.Hour))
	env.Signals.HistoryKept.WaitCount(t, 20*time.Second, "a round of history", 1)
	// The 12000 past retention are deleted; the recent one moves.
	if kept := env.Signals.HistoryKept.All()[0]; kept != 12001 {
		t.Fatalf("the first round took %d sent rows out of messages, want all 12001", kept)
	}
	var hot, history, dead int
	if err := b.Pool.QueryRow(b.Ctx, "SELECT (SELECT count(*) FILTER (WHERE status = 'sent') FROM "+b.Outbox.Schema()+".messages), "+
		"(SELECT count(*) FROM "+b.Outbox.Schema()+".messages_history), "+
		"(SELECT count(*) FILTER (WHERE status = 'dead') FROM "+b.Outbox.Schema()+".messages)").Scan(&hot, &history, &dead); err != nil {
		t.Fatal(err)
	}
	if hot != 0 || history != 1 || dead != 1 {
		t.Fatalf("after a round: %d sent rows in messages, %d in history, %d dead; want 0, the recent one, and the dead one kept",
			hot, history, dead)
	}
}

package relay_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/coretest"
	"github.com/outboxd/outboxd/internal/testrelay"
)

func TestMaintenancePrunesOldSentRowsOnly(t *testing.T) {
	b := coretest.Setup(t)
	_, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.messages (sink, dedup_key, payload, status, sent_at)
		SELECT 's', 'old' || g, '{}'::jsonb, 'sent', now() - interval '2 hours' FROM generate_series(1, 12000) g
		UNION ALL SELECT 's', 'recent', '{}', 'sent', now()
		UNION ALL SELECT 's', 'dead', '{}', 'dead', NULL`)
	if err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, b.Pool, relay.Config{Schema: b.Outbox.Schema(), SentRetention: time.Hour, Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	signals.Maintained.WaitCount(t, 20*time.Second, "a maintenance round", 1)
	// The 12000 past retention are deleted; the recent one moves to
	// messages_history (migration 013).
	if pruned := signals.Maintained.All()[0]; pruned != 12001 {
		t.Fatalf("the first maintenance round took %d sent rows out of messages, want all 12001", pruned)
	}
	if c := b.StatusCounts(t); c["sent"] != 1 || c["dead"] != 1 {
		t.Fatalf("maintenance must keep recent sent rows, and dead rows until redriven or purged: %v", c)
	}
}

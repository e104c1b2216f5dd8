package relay_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testrelay"
)

func TestMaintenancePrunesOldSentRowsOnly(t *testing.T) {
	b := setup(t)
	_, err := b.pool.Exec(b.ctx, "INSERT INTO "+b.ob.Schema()+`.messages (sink, dedup_key, payload, status, sent_at)
		SELECT 's', 'old' || g, '{}'::jsonb, 'sent', now() - interval '2 hours' FROM generate_series(1, 12000) g
		UNION ALL SELECT 's', 'recent', '{}', 'sent', now()
		UNION ALL SELECT 's', 'dead', '{}', 'dead', NULL`)
	if err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, b.pool, relay.Config{Schema: b.ob.Schema(), SentRetention: time.Hour, Sinks: []relay.SinkConfig{{Name: "s", Sink: newRecordingSink()}}})
	signals.Maintained.WaitCount(t, 20*time.Second, "a maintenance round", 1)
	if pruned := signals.Maintained.All()[0]; pruned != 12000 {
		t.Fatalf("the first maintenance round pruned %d rows, want the 12000 old sent ones", pruned)
	}
	if c := statusCounts(t, b); c["sent"] != 1 || c["dead"] != 1 {
		t.Fatalf("maintenance must keep recent sent rows, and dead rows until redriven or purged: %v", c)
	}
}

package relay_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// Maintenance deletes the sent rows and the audit entries older than
// retention.sent, and nothing younger.
// (Mutation: maintainOnce without its PruneAudit fails this test: the old
// audit entry stays.)
func TestMaintenancePrunesOldSentRowsOnly(t *testing.T) {
	b := coretest.Setup(t)
	_, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.messages (sink, dedup_key, payload, status, sent_at)
		SELECT 's', 'old' || g, '{}'::jsonb, 'sent', now() - interval '2 hours' FROM generate_series(1, 12000) g
		UNION ALL SELECT 's', 'recent', '{}', 'sent', now()
		UNION ALL SELECT 's', 'dead', '{}', 'dead', NULL`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.audit_log (at, actor, role, source, action)
		VALUES (now() - interval '2 hours', 'old', 'admin', 'cli', 'purge'), (now(), 'recent', 'admin', 'cli', 'purge')`); err != nil {
		t.Fatal(err)
	}
	signals := testrelay.Run(t, b.Pool, b.Outbox.Schema(), relay.Config{SentRetention: time.Hour, Sinks: []relay.SinkConfig{{Name: "s", Sink: coretest.NewRecordingSink()}}})
	signals.Maintained.WaitCount(t, 20*time.Second, "a maintenance round", 1)
	// The 12000 past retention are deleted; the recent one moves to
	// messages_history (migration 013).
	if pruned := signals.Maintained.All()[0]; pruned != 12001 {
		t.Fatalf("the first maintenance round took %d sent rows out of messages, want all 12001", pruned)
	}
	if c := b.StatusCounts(t); c["sent"] != 1 || c["dead"] != 1 {
		t.Fatalf("maintenance must keep recent sent rows, and dead rows until redriven or purged: %v", c)
	}
	var actors []string
	rows, err := b.Pool.Query(b.Ctx, "SELECT actor FROM "+b.Outbox.Schema()+".audit_log WHERE action = 'purge'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		actors = append(actors, a)
	}
	if rows.Err() != nil || len(actors) != 1 || actors[0] != "recent" {
		t.Fatalf("audit entries after maintenance: %v %v; want the recent one alone", actors, rows.Err())
	}
}

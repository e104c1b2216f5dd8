package maintenance_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/internal/relaysignal"
)

// Maintenance deletes the audit entries older than the sent retention, and
// none younger, on the leading relay; a relay that does not lead prunes
// nothing.
//
// Mutation checked: prune without its PruneAudit fails this test (the old
// audit entry stays); round ignoring Leading fails it too (the follower's
// round is reported).
func TestMaintenancePrunesOldAuditEntriesOnTheLeaderOnly(t *testing.T) {
	b, env := setup(t)
	if _, err := b.Pool.Exec(b.Ctx, "INSERT INTO "+b.Outbox.Schema()+`.audit_log (at, actor, role, source, action)
		VALUES (now() - interval '2 hours', 'old', 'admin', 'cli', 'purge'), (now(), 'recent', 'admin', 'cli', 'purge')`); err != nil {
		t.Fatal(err)
	}
	const interval = 50 * time.Millisecond
	cfg := maintenance.MaintenanceConfig{Interval: interval, SentRetention: time.Hour, ThreadRetention: time.Hour, WaiterPruneAfter: time.Hour}
	leader := maintenance.NewLeader(env, "leader", leaseRound)
	start(t, b.Ctx, leader)
	<-leader.Elected()
	followerEnv := env
	followerEnv.Signals = &relaysignal.Relay{}
	follower := maintenance.NewLeader(followerEnv, "follower", leaseRound)
	start(t, b.Ctx, follower)
	start(t, b.Ctx, maintenance.NewMaintenance(followerEnv, follower, cfg))
	start(t, b.Ctx, maintenance.NewMaintenance(env, leader, cfg))
	// Ten rounds of the leader: time enough for the follower's, were it
	// to run any.
	env.Signals.Maintained.WaitCount(t, 30*time.Second, "ten maintenance rounds", 10)
	if pruned := env.Signals.Maintained.All()[0]; pruned != 1 {
		t.Errorf("the first round pruned %d rows, want the old audit entry", pruned)
	}
	if n := len(followerEnv.Signals.Maintained.All()); n != 0 {
		t.Errorf("the relay that does not lead ran %d maintenance rounds", n)
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

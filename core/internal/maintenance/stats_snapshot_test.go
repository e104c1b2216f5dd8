package maintenance_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// A relay that does not lead takes no snapshot of the row counts; the
// leading relay takes one at once and again every interval.
//
// Mutation checked: the snapshot loop ignoring Leading fails this test
// (the follower's counts show up before the leader takes any).
func TestStatsSnapshotIsTakenByTheLeaderOnly(t *testing.T) {
	b, env := setup(t)
	b.EnqueueN(t, "elsewhere", 4, nil)
	const interval = 50 * time.Millisecond
	leader := maintenance.NewLeader(env, "leader", leaseRound)
	start(t, b.Ctx, leader)
	<-leader.Elected()
	follower := maintenance.NewLeader(env, "follower", leaseRound)
	start(t, b.Ctx, follower)
	start(t, b.Ctx, maintenance.NewStatsSnapshot(env, b.Outbox.Operator, follower, interval))
	<-follower.Elected()
	// Nothing to wait for when nothing happens: the follower is watched
	// for ten of its intervals.
	watchedFrom := time.Now()
	testrelay.WaitFor(t, 20*time.Second, "ten intervals of the follower", func() bool {
		snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if !snap.TakenAt.IsZero() || len(snap.Sinks) > 0 {
			t.Fatalf("a snapshot was taken (at %s: %v) while only a relay that does not lead took part", snap.TakenAt, snap.Sinks)
		}
		return time.Since(watchedFrom) > 10*interval
	})

	start(t, b.Ctx, maintenance.NewStatsSnapshot(env, b.Outbox.Operator, leader, interval))
	// Polls the snapshot: it is retaken at every interval.
	taken := map[time.Time]bool{}
	testrelay.WaitFor(t, 20*time.Second, "three snapshots counting the rows", func() bool {
		snap, err := b.Outbox.StatsSnapshot(b.Ctx, b.Pool)
		if err == nil && snap.TakenBy == "leader" && snap.Sinks["elsewhere"].Pending == 4 {
			taken[snap.TakenAt] = true
		}
		return len(taken) >= 3
	})
}

package operator

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/internal/store"
)

// DefaultStatsInterval is how often the cluster's row counts are
// recomputed (by one relay) and how often each relay adds its delivery
// counts to delivery_minutes.
const DefaultStatsInterval = 5 * time.Second

// statsSentWindow is how far back the snapshot counts sent rows: the
// sent index is walked over this window only.
const statsSentWindow = time.Hour

// A sink's open rows are counted by reading each of them: seconds of a
// core for a million. A sink with at least statsLargeBacklog open rows at
// its last count (a paused or throttled sink, one no relay is configured
// for) keeps that count for up to statsLargeBacklogEvery, or until a
// hundredth of it has been delivered, so a stuck backlog costs the
// database one count every few minutes, not one every few seconds.
const (
	statsLargeBacklog      = 100_000
	statsLargeBacklogEvery = 5 * time.Minute
)

// SinkCounts is one sink's rows in the cluster's snapshot. Every count
// comes from a partial index (or, for SentLastHour, the last hour of the
// sent index): delivered history is never counted.
type SinkCounts struct {
	Pending      int64 `json:"pending"`
	InProgress   int64 `json:"in_progress"`
	Failed       int64 `json:"failed"`
	Dead         int64 `json:"dead"`
	SentLastHour int64 `json:"sent_last_hour"`
	// WaitingDisabled are the pending and failed rows (counted in Pending
	// and Failed) that wait on a disabled destination: no relay claims
	// them until it is enabled again (docs/destinations.md).
	WaitingDisabled int64 `json:"waiting_disabled"`
	// OldestPendingAge is the age of the oldest row waiting for delivery
	// (pending or failed, not waiting on a disabled destination) when the
	// snapshot was read.
	OldestPendingAge time.Duration `json:"-"`
}

// StatsSnapshot is the cluster's row counts per sink as the relay holding
// the lead last computed them.
type StatsSnapshot struct {
	Sinks map[string]SinkCounts
	// TakenAt is when the counts were computed, TakenBy the relay that
	// leads (see Relay.ID); both zero before any relay took a snapshot.
	TakenAt time.Time
	TakenBy string
}

// StatsSnapshot reads the cluster's last row counts: a few rows, whatever
// the size of the outbox. Relays recompute them every
// Config.StatsInterval; see TakenAt for their age.
func (o *Operator) StatsSnapshot(ctx context.Context, db store.DBTX) (StatsSnapshot, error) {
	rows, err := o.q.StatsSnapshot(ctx, db)
	if err != nil {
		return StatsSnapshot{}, fmt.Errorf("outbox: read the stats snapshot: %w", err)
	}
	snap := StatsSnapshot{Sinks: map[string]SinkCounts{}}
	for _, r := range rows {
		snap.TakenAt, snap.TakenBy = r.ComputedAt, r.TakenBy
		if r.Sink != nil {
			snap.Sinks[*r.Sink] = SinkCounts{Pending: r.Pending, InProgress: r.InProgress, Failed: r.Failed,
				Dead: r.Dead, SentLastHour: r.SentLastHour, WaitingDisabled: r.WaitingDisabled,
				OldestPendingAge: time.Duration(r.OldestWaitingSeconds * float64(time.Second))}
		}
	}
	return snap, nil
}

// RefreshStatsSnapshot recomputes the cluster's row counts now (see
// [Operator.StatsSnapshot]), recording by as their author when no relay
// leads. Relays do it every Config.StatsInterval on their own; call it
// from tools and tests that run no relay. It reads the partial indexes
// and the last hour of the sent index, never older delivered history.
func (o *Operator) RefreshStatsSnapshot(ctx context.Context, db store.DBTX, by string) error {
	if err := o.q.TakeStatsSnapshot(ctx, db, statsSentWindow, by, statsLargeBacklog, statsLargeBacklogEvery); err != nil {
		return fmt.Errorf("outbox: recompute the stats snapshot: %w", err)
	}
	return nil
}

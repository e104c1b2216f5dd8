package core

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultStatsInterval is how often the cluster's row counts are
// recomputed (by one relay) and how often each relay adds its delivery
// counts to delivery_minutes.
const DefaultStatsInterval = 5 * time.Second

// statsLeadTimeout is how many rounds the relay computing the counts may
// miss before another takes over: long enough that a busy round or a GC
// pause does not move the lead (and the gauges with it) between pods.
const statsLeadTimeout = 4

// statsSlowdown spaces the snapshots out when one takes long (a huge
// backlog): the next starts no sooner than this many times the last one's
// duration, so the counts never cost the database more than a tenth of a
// connection.
const statsSlowdown = 10

// statsSentWindow is how far back the snapshot counts sent rows: the
// sent index is walked over this window only.
const statsSentWindow = time.Hour

// statsTimeout bounds one snapshot statement.
const statsTimeout = 30 * time.Second

// SinkCounts is one sink's rows in the cluster's snapshot. Every count
// comes from a partial index (or, for SentLastHour, the last hour of the
// sent index): delivered history is never counted.
type SinkCounts struct {
	Pending      int64 `json:"pending"`
	InProgress   int64 `json:"in_progress"`
	Failed       int64 `json:"failed"`
	Dead         int64 `json:"dead"`
	SentLastHour int64 `json:"sent_last_hour"`
	// OldestPendingAge is the age of the oldest row waiting for delivery
	// (pending or failed) when the snapshot was read.
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
func (o *Outbox) StatsSnapshot(ctx context.Context, db DBTX) (StatsSnapshot, error) {
	rows, err := db.Query(ctx, o.sql.statsSnap)
	if err != nil {
		return StatsSnapshot{}, fmt.Errorf("outbox: read the stats snapshot: %w", err)
	}
	snap := StatsSnapshot{Sinks: map[string]SinkCounts{}}
	var (
		sink       *string
		c          SinkCounts
		ageSeconds float64
	)
	_, err = pgx.ForEachRow(rows, []any{&snap.TakenAt, &snap.TakenBy, &sink, &c.Pending, &c.InProgress, &c.Failed,
		&c.Dead, &c.SentLastHour, &ageSeconds}, func() error {
		if sink != nil {
			c.OldestPendingAge = time.Duration(ageSeconds * float64(time.Second))
			snap.Sinks[*sink] = c
		}
		return nil
	})
	if err != nil {
		return StatsSnapshot{}, fmt.Errorf("outbox: read the stats snapshot: %w", err)
	}
	return snap, nil
}

// takeStatsSnapshots keeps the cluster's row counts current: every round,
// each relay tries to take or renew the lead, and the one that holds it
// recomputes sink_stats. The lead sticks to one relay while it runs, so
// the gauges it alone exports (see GaugeConfig.Relay) stay on one pod.
func (r *Relay) takeStatsSnapshots(ctx context.Context) {
	for {
		took, err := r.takeStatsSnapshot(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox: could not recompute the row counts", "error", err)
		}
		if !sleep(ctx, max(r.cfg.StatsInterval, statsSlowdown*took)) {
			return
		}
	}
}

// takeStatsSnapshot recomputes the counts if this relay leads, and
// returns how long that took.
func (r *Relay) takeStatsSnapshot(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	q := r.ob.sql
	var lead bool
	err := r.db.QueryRow(ctx, q.takeStatsLead, r.id, statsLeadTimeout*r.cfg.StatsInterval).Scan(&lead)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil // another relay leads
	case err != nil:
		return 0, fmt.Errorf("take the stats lead: %w", err)
	}
	started := time.Now()
	if err := r.ob.RefreshStatsSnapshot(ctx, r.db, r.id); err != nil {
		return 0, err
	}
	return time.Since(started), nil
}

// RefreshStatsSnapshot recomputes the cluster's row counts now (see
// [Outbox.StatsSnapshot]), recording by as their author when no relay
// leads. Relays do it every Config.StatsInterval on their own; call it
// from tools and tests that run no relay. It reads the partial indexes
// and the last hour of the sent index, never older delivered history.
func (o *Outbox) RefreshStatsSnapshot(ctx context.Context, db DBTX, by string) error {
	if _, err := db.Exec(ctx, o.sql.takeStatsSnapshot, statsSentWindow, by); err != nil {
		return fmt.Errorf("outbox: recompute the stats snapshot: %w", err)
	}
	return nil
}

// ID names the relay in the database (the stats lead): host name,
// process id and a random suffix, unique per Relay.
func (r *Relay) ID() string { return r.id }

func newRelayID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8])
}

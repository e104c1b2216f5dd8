package relay

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// statsLeadTimeout is how many rounds the relay computing the counts may
// miss before another takes over: long enough that a busy round or a GC
// pause does not move the lead (and the gauges with it) between pods.
const statsLeadTimeout = 4

// statsSlowdown spaces the snapshots out when one takes long (a huge
// backlog): the next starts no sooner than this many times the last one's
// duration, so the counts never cost the database more than a tenth of a
// connection.
const statsSlowdown = 10

// statsTimeout bounds one snapshot statement.
const statsTimeout = 30 * time.Second

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
	q := r.q
	var lead bool
	err := r.db.QueryRow(ctx, q.TakeStatsLead, r.id, statsLeadTimeout*r.cfg.StatsInterval).Scan(&lead)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil // another relay leads
	case err != nil:
		return 0, fmt.Errorf("take the stats lead: %w", err)
	}
	started := time.Now()
	if err := r.ops.RefreshStatsSnapshot(ctx, r.db, r.id); err != nil {
		return 0, err
	}
	return time.Since(started), nil
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

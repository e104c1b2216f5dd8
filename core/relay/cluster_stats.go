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

// statsLeadTimeout is how many rounds the leading relay may miss before
// another takes over: long enough that a busy round or a GC
// pause does not move the lead (and the gauges with it) between pods.
const statsLeadTimeout = 4

// statsSlowdown spaces the snapshots out when one takes long (a huge
// backlog): the next starts no sooner than this many times the last one's
// duration, so the counts never cost the database more than a tenth of a
// connection.
const statsSlowdown = 10

// statsTimeout bounds one snapshot statement.
const statsTimeout = 30 * time.Second

// lead runs the relay's one leader election, which decides who does the
// cluster's chores: every round each relay tries to take or renew the lead
// (a lease row, sql/take_stats_lead.sql), and the one that holds it
// recomputes the stats snapshot, runs maintenance (see maintain) and alone
// exports the table gauges (operator.GaugeConfig.Relay). The lead sticks to
// one relay while it runs and passes to another a few rounds after it
// stops, so nothing needs a connection held for it. firstRound is closed
// once the first attempt is over, so maintenance knows whether to start.
func (r *Relay) lead(ctx context.Context, firstRound chan<- struct{}) {
	for {
		took, err := r.leadRound(ctx)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("outbox: could not take the lead or recompute the row counts", "error", err)
		}
		if firstRound != nil {
			close(firstRound)
			firstRound = nil
		}
		if !sleep(ctx, max(r.cfg.StatsInterval, statsSlowdown*took)) {
			return
		}
	}
}

// leadRound takes or renews the lead and, while this relay leads,
// recomputes the counts; it returns how long they took.
func (r *Relay) leadRound(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	_, err := r.q.TakeStatsLead(ctx, r.db, r.id, statsLeadTimeout*r.cfg.StatsInterval)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		r.leading.Store(false) // another relay leads
		return 0, nil
	case err != nil:
		// The lease may run out while the database is away: stop acting
		// as the leader rather than risk two.
		r.leading.Store(false)
		return 0, fmt.Errorf("take the lead: %w", err)
	}
	r.leading.Store(true)
	started := time.Now()
	if err := r.ops.RefreshStatsSnapshot(ctx, r.db, r.id); err != nil {
		return 0, err
	}
	return time.Since(started), nil
}

// ID names the relay in the database (the lead, see lead): host name,
// process id and a random suffix, unique per Relay.
func (r *Relay) ID() string { return r.id }

func newRelayID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), rand.Text()[:8])
}

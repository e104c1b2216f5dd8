package maintenance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// leadTimeoutRounds is how many rounds the leading relay may miss
	// before another takes over: long enough that a busy round or a GC
	// pause does not move the lead (and the table gauges with it) between
	// pods.
	leadTimeoutRounds = 4
	// leaderRoundTimeout bounds one attempt to take or renew the lead.
	leaderRoundTimeout = 10 * time.Second
)

// Leader is the relay's one leader election, which decides who does the
// cluster's chores: every round each relay tries to take or renew the
// lead (a lease row, sql/take_stats_lead.sql), and the one that holds it
// recomputes the stats snapshot, rotates history, runs maintenance and
// alone exports the table gauges (operator.GaugeConfig.Relay). The lead
// sticks to one relay while it runs and passes to another a few rounds
// after it stops, so nothing needs a connection held for it.
type Leader struct {
	runner
	env Env
	// id names the relay in the lease row.
	id       string
	interval time.Duration
	leading  atomic.Bool
	// elected is closed once the first round is over, so the chores know
	// whether this relay leads.
	elected     chan struct{}
	electedOnce sync.Once
}

// NewLeader returns the election of the relay named id, a round every
// interval (the relay's StatsInterval; positive).
func NewLeader(env Env, id string, interval time.Duration) *Leader {
	return &Leader{env: env, id: id, interval: interval, elected: make(chan struct{})}
}

// Start takes part in the election until ctx ends or Stop.
func (l *Leader) Start(ctx context.Context) {
	l.start(ctx, func(ctx context.Context) {
		every(ctx, l.interval, func(ctx context.Context) {
			if err := l.round(ctx); err != nil && ctx.Err() == nil {
				l.env.Logger.Warn("outbox: could not take the lead", "error", err)
			}
			l.electedOnce.Do(func() { close(l.elected) })
		})
		// A stopped relay does no more chores, whatever the lease row says.
		l.leading.Store(false)
	})
}

// Leading reports whether this relay held the lead at its last round.
func (l *Leader) Leading() bool { return l.leading.Load() }

// Elected is closed once the relay's first round of the election is over.
func (l *Leader) Elected() <-chan struct{} { return l.elected }

// round takes or renews the lead.
func (l *Leader) round(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, leaderRoundTimeout)
	defer cancel()
	_, err := l.env.Q.TakeStatsLead(ctx, l.env.DB, l.id, leadTimeoutRounds*l.interval)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		l.leading.Store(false) // another relay leads
		return nil
	case err != nil:
		// The lease may run out while the database is away: stop acting
		// as the leader rather than risk two.
		l.leading.Store(false)
		return fmt.Errorf("take the lead: %w", err)
	}
	l.leading.Store(true)
	return nil
}

package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/operator"
)

const (
	// statsSlowdown spaces the snapshots out when one takes long (a huge
	// backlog): the next starts no sooner than this many times the last
	// one's duration, so the counts never cost the database more than a
	// tenth of a connection.
	statsSlowdown = 10
	// statsTimeout bounds one snapshot statement.
	statsTimeout = 30 * time.Second
)

// StatsSnapshot recomputes the row counts that the operator's stats and
// the table gauges read (operator.Operator.RefreshStatsSnapshot), on the
// leading relay, every interval, or less often when they take long.
type StatsSnapshot struct {
	runner
	env      Env
	ops      *operator.Operator
	leader   *Leader
	interval time.Duration
}

// NewStatsSnapshot returns the snapshot taken through ops while leader
// leads, every interval (the relay's StatsInterval; positive).
func NewStatsSnapshot(env Env, ops *operator.Operator, leader *Leader, interval time.Duration) *StatsSnapshot {
	return &StatsSnapshot{env: env, ops: ops, leader: leader, interval: interval}
}

// Start takes snapshots until ctx ends or Stop.
func (s *StatsSnapshot) Start(ctx context.Context) {
	s.start(ctx, func(ctx context.Context) {
		select {
		case <-ctx.Done():
			return
		case <-s.leader.Elected():
		}
		for {
			var took time.Duration
			if s.leader.Leading() {
				started := time.Now()
				if err := s.take(ctx); err != nil && ctx.Err() == nil {
					s.env.Logger.Warn("outbox: could not recompute the row counts", "error", err)
				}
				took = time.Since(started)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(max(s.interval, statsSlowdown*took)):
			}
		}
	})
}

func (s *StatsSnapshot) take(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	if err := s.ops.RefreshStatsSnapshot(ctx, s.env.DB, s.leader.id); err != nil {
		return fmt.Errorf("stats snapshot: %w", err)
	}
	return nil
}

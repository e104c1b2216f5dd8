package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// rateReserveHorizon is how far ahead one relay reserves delivery permits of
// a rate-limited sink. Reserving a small batch at a time keeps the database
// out of the per-message path, while short horizons keep one relay from
// hoarding permits the others could use.
const rateReserveHorizon = time.Second

// clusterLimiter coordinates a sink's rate limit across every relay through
// one row per sink in sink_limits, using GCRA: tat is the theoretical time of
// the next permit; a permit may start up to (burst-1) intervals early. A
// reservation of n permits is one atomic upsert that moves tat n intervals
// forward and tells the caller when each of its permits may start.
//
// The same row carries paused_until: a RetryAfter from the destination
// pauses the sink for every relay (and pushes tat past the pause so the
// permits after it stay evenly spread).
type clusterLimiter struct {
	pool *pgxpool.Pool
	sql  queries

	mu     sync.Mutex
	paused map[string]time.Time // local monotonic deadline per paused sink
}

func newClusterLimiter(pool *pgxpool.Pool, q queries) *clusterLimiter {
	return &clusterLimiter{pool: pool, sql: q, paused: map[string]time.Time{}}
}

// reserve takes n permits of sink's limit and returns, for each, how long to
// wait before starting the delivery.
func (l *clusterLimiter) reserve(ctx context.Context, sink string, rl RateLimit, n int) ([]time.Duration, error) {
	interval := rl.interval()
	var base, now time.Time
	var pausedUntil *time.Time
	err := l.pool.QueryRow(ctx, l.sql.reservePermits, sink, n, interval).Scan(&base, &now, &pausedUntil)
	if err != nil {
		return nil, fmt.Errorf("outbox: reserve %d permits of sink %q: %w", n, sink, err)
	}
	tolerance := time.Duration(rl.Burst-1) * interval
	waits := make([]time.Duration, n)
	for i := range waits {
		start := base.Add(time.Duration(i)*interval - tolerance)
		if pausedUntil != nil && start.Before(*pausedUntil) {
			start = *pausedUntil
		}
		waits[i] = max(0, start.Sub(now))
	}
	return waits, nil
}

// pause stops sink cluster-wide for d: it records the pause in the database
// (where relays that start later find it) and notifies the running relays.
func (l *clusterLimiter) pause(ctx context.Context, sink string, d time.Duration, channel string) error {
	l.pauseLocally(sink, d)
	if _, err := l.pool.Exec(ctx, l.sql.pauseSink, sink, d, channel, pauseNotificationPrefix+sink); err != nil {
		return fmt.Errorf("outbox: pause sink %q for %s: %w", sink, d, err)
	}
	return nil
}

func (l *clusterLimiter) pauseLocally(sink string, d time.Duration) {
	until := time.Now().Add(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.paused[sink]) {
		l.paused[sink] = until
	}
}

// refreshPauses loads the pauses recorded in the database, after a pause
// notification or a reconnect of the listener.
func (l *clusterLimiter) refreshPauses(ctx context.Context) error {
	rows, err := l.pool.Query(ctx, l.sql.activePauses)
	if err != nil {
		return fmt.Errorf("outbox: load sink pauses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var sink string
		var remaining time.Duration
		if err := rows.Scan(&sink, &remaining); err != nil {
			return fmt.Errorf("outbox: load sink pauses: %w", err)
		}
		l.pauseLocally(sink, remaining)
	}
	return rows.Err()
}

// pausedFor returns how much longer sink is paused (0 when it is not).
func (l *clusterLimiter) pausedFor(sink string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, time.Until(l.paused[sink]))
}

// pausedSinks lists the sinks paused right now.
func (l *clusterLimiter) pausedSinks() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	now := time.Now()
	for sink, until := range l.paused {
		if until.After(now) {
			out = append(out, sink)
		} else {
			delete(l.paused, sink)
		}
	}
	return out
}

// Package ratelimit coordinates sinks' rate limits and Retry-After pauses
// across every relay of a cluster through one row per sink in PostgreSQL,
// and per-destination limits through one row per sink and busy key.
package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/internal/listener"
	"github.com/outboxd/outboxd/internal/store"
)

// Queries are the statements the limiter runs (internal/store's
// reserve_permits.sql, reserve_key_permits.sql, pause_sink.sql and
// active_pauses.sql); *store.Queries has them.
type Queries interface {
	ReservePermits(ctx context.Context, db store.DBTX, sink string, count int, permit time.Duration) (store.ReservePermitsRow, error)
	ReserveKeyPermits(ctx context.Context, db store.DBTX, sink string, keys []string, counts []int, permit time.Duration) ([]store.ReserveKeyPermitsRow, error)
	PauseSink(ctx context.Context, db store.DBTX, sink string, pause time.Duration, channel string, payload string) error
	ActivePauses(ctx context.Context, db store.DBTX) ([]store.ActivePausesRow, error)
}

// Limiter implements GCRA ("generic cell rate algorithm") on one row per
// sink: tat is the theoretical time of the next permit; a permit may start
// up to (burst-1) intervals early. A reservation of n permits is one atomic
// upsert that moves tat n intervals forward and tells the caller when each
// of its permits may start.
//
// The same row carries paused_until: a Retry-After from the destination
// pauses the sink for every relay (and pushes tat past the pause so the
// permits after it stay evenly spread).
type Limiter struct {
	pool *pgxpool.Pool
	q    Queries

	mu     sync.Mutex
	paused map[string]time.Time // local monotonic deadline per paused sink
}

// New returns a limiter that runs its statements on pool.
func New(pool *pgxpool.Pool, q Queries) *Limiter {
	return &Limiter{pool: pool, q: q, paused: map[string]time.Time{}}
}

// Reserve takes n permits of sink's limit (one per interval, burst back to
// back after an idle spell) and returns, for each, how long to wait before
// starting the delivery.
func (l *Limiter) Reserve(ctx context.Context, sink string, interval time.Duration, burst, n int) ([]time.Duration, error) {
	r, err := l.q.ReservePermits(ctx, l.pool, sink, n, interval)
	if err != nil {
		return nil, fmt.Errorf("outbox: reserve %d permits of sink %q: %w", n, sink, err)
	}
	tolerance := time.Duration(burst-1) * interval
	waits := make([]time.Duration, n)
	for i := range waits {
		start := r.Base.Add(time.Duration(i)*interval - tolerance)
		if r.PausedUntil != nil && start.Before(*r.PausedUntil) {
			start = *r.PausedUntil
		}
		waits[i] = max(0, start.Sub(r.Now))
	}
	return waits, nil
}

// ReserveKeys takes counts[i] permits of destination keys[i] of sink, each
// key limited on its own (one permit per interval, burst back to back after
// an idle spell), in one statement. keys must be sorted and distinct. It
// returns, per key, how long to wait before starting each delivery; a
// pause of the whole sink delays them all.
func (l *Limiter) ReserveKeys(ctx context.Context, sink string, keys []string, counts []int, interval time.Duration, burst int) (map[string][]time.Duration, error) {
	rows, err := l.q.ReserveKeyPermits(ctx, l.pool, sink, keys, counts, interval)
	if err != nil {
		return nil, fmt.Errorf("outbox: reserve permits of %d keys of sink %q: %w", len(keys), sink, err)
	}
	n := make(map[string]int, len(keys))
	for i, k := range keys {
		n[k] = counts[i]
	}
	paused := l.PausedFor(sink)
	tolerance := time.Duration(burst-1) * interval
	waits := make(map[string][]time.Duration, len(keys))
	for _, r := range rows {
		base := r.Tat.Add(-time.Duration(n[r.Key]) * interval)
		w := make([]time.Duration, n[r.Key])
		for i := range w {
			w[i] = max(paused, base.Add(time.Duration(i)*interval-tolerance).Sub(r.Now))
		}
		waits[r.Key] = w
	}
	return waits, nil
}

// Pause stops sink cluster-wide for d: it records the pause in the
// database (where relays that start later find it) and notifies the running
// relays on channel.
func (l *Limiter) Pause(ctx context.Context, sink string, d time.Duration, channel string) error {
	l.pauseLocally(sink, d)
	if err := l.q.PauseSink(ctx, l.pool, sink, d, channel, listener.PausePrefix+sink); err != nil {
		return fmt.Errorf("outbox: pause sink %q for %s: %w", sink, d, err)
	}
	return nil
}

func (l *Limiter) pauseLocally(sink string, d time.Duration) {
	until := time.Now().Add(d)
	l.mu.Lock()
	defer l.mu.Unlock()
	if until.After(l.paused[sink]) {
		l.paused[sink] = until
	}
}

// RefreshPauses replaces the local pauses with those recorded in the
// database, after a pause notification or a reconnect of the listener. The
// database has the last word: a pause that was resumed by hand (or
// shortened) there ends here too.
func (l *Limiter) RefreshPauses(ctx context.Context) error {
	rows, err := l.q.ActivePauses(ctx, l.pool)
	if err != nil {
		return fmt.Errorf("outbox: load sink pauses: %w", err)
	}
	now := time.Now()
	paused := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		paused[r.Sink] = now.Add(r.Remaining)
	}
	l.mu.Lock()
	l.paused = paused
	l.mu.Unlock()
	return nil
}

// PausedFor returns how much longer sink is paused (0 when it is not).
func (l *Limiter) PausedFor(sink string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, time.Until(l.paused[sink]))
}

// PausedSinks lists the sinks paused right now.
func (l *Limiter) PausedSinks() []string {
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

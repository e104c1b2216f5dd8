// Package ratelimit coordinates sinks' rate limits and Retry-After pauses
// across every relay of a cluster through one row per sink in PostgreSQL,
// and per-key limits (RateLimit.PerKey) through one row per sink and busy
// rate key.
package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// Queries are the statements the limiter runs (internal/store's
// reserve_permits.sql, reserve_key_permits.sql, pause_sink.sql,
// pause_key.sql and active_pauses.sql); *store.Queries has them.
type Queries interface {
	ReservePermits(ctx context.Context, db store.DBTX, arg store.ReservePermitsParams) (store.ReservePermitsRow, error)
	ReserveKeyPermits(ctx context.Context, db store.DBTX, sink string, keys []string, counts []int, permits []time.Duration) ([]store.ReserveKeyPermitsRow, error)
	PauseSink(ctx context.Context, db store.DBTX, sink string, pause time.Duration, channel string, payload string) error
	PauseKey(ctx context.Context, db store.DBTX, sink string, key string, pause time.Duration) error
	ActivePauses(ctx context.Context, db store.DBTX) ([]store.ActivePausesRow, error)
}

// Limiter implements GCRA ("generic cell rate algorithm") on one row per
// sink: tat is the theoretical time of the next permit; a permit may start
// up to (burst-1) intervals early. A reservation of n permits is one atomic
// upsert that moves tat n intervals forward and tells the caller when each
// of its permits may start.
//
// The same row carries paused_until: a Retry-After from the receiver
// pauses the sink for every relay (and pushes tat past the pause so the
// permits after it stay evenly spread).
type Limiter struct {
	pool *pgxpool.Pool
	q    Queries

	mu     sync.Mutex
	paused map[string]time.Time   // local monotonic deadline per paused sink
	keys   map[receiver]time.Time // the same per paused rate key
	next   map[string]time.Time   // local time of each sink's next permit, as last reserved
}

// receiver is one rate key of a per_key sink.
type receiver struct{ sink, key string }

// pauseGrain is how much later a pause must end than the one known for it
// to be written again: Retry-After comes in whole seconds, and the 429s of
// one storm, answered a few milliseconds apart, are one pause, not one write
// (and one notification to every relay) each.
const pauseGrain = time.Second

// New returns a limiter that runs its statements on pool.
func New(pool *pgxpool.Pool, q Queries) *Limiter {
	return &Limiter{pool: pool, q: q, paused: map[string]time.Time{}, keys: map[receiver]time.Time{}, next: map[string]time.Time{}}
}

// Grant is what a reservation of a sink's permits gave: a wait per permit
// granted (fewer than asked when the later ones would start beyond the
// hold window, none while the sink is paused), how soon the first permit
// after them starts, and the pause in force.
type Grant struct {
	Waits  []time.Duration
	Next   time.Duration
	Paused time.Duration
}

// Reserve takes up to n permits of sink's limit (one per interval, burst
// back to back after an idle spell), only those that start within hold,
// and returns how long to wait before starting each delivery. The permits
// it does not grant stay for whichever relay claims when they come due.
func (l *Limiter) Reserve(ctx context.Context, sink string, interval time.Duration, burst, n int, hold time.Duration) (Grant, error) {
	tolerance := time.Duration(burst-1) * interval
	r, err := l.q.ReservePermits(ctx, l.pool, store.ReservePermitsParams{Sink: sink, Count: n, Permit: interval, Ahead: hold + tolerance})
	if err != nil {
		return Grant{}, fmt.Errorf("outbox: reserve %d permits of sink %q: %w", n, sink, err)
	}
	g := Grant{Waits: make([]time.Duration, r.Granted), Next: max(0, r.Tat.Add(-tolerance).Sub(r.Now))}
	first := r.Tat.Add(-time.Duration(r.Granted) * interval)
	for i := range g.Waits {
		g.Waits[i] = max(0, first.Add(time.Duration(i)*interval-tolerance).Sub(r.Now))
	}
	if r.PausedUntil != nil {
		g.Paused = max(0, r.PausedUntil.Sub(r.Now))
		l.pauseLocally(sink, g.Paused)
	}
	l.mu.Lock()
	l.next[sink] = time.Now().Add(g.Next)
	l.mu.Unlock()
	return g, nil
}

// NextPermitIn is how soon the next permit of sink starts, as far as this
// relay's last reservation tells (0 when it made none, or that time has
// come): a loop claims no rows it could not start within its hold window.
func (l *Limiter) NextPermitIn(sink string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, time.Until(l.next[sink]))
}

// KeyLimit is one rate key's limit: a permit per Interval, at most
// Burst of them back to back after an idle spell.
type KeyLimit struct {
	Interval time.Duration
	Burst    int
}

// ReserveKeys takes counts[i] permits of sink's rate key keys[i], each
// key limited on its own by limits[i], in one statement. keys must be
// sorted and distinct. It returns, per key, how long to wait before
// starting each delivery; a pause of the whole sink delays them all.
func (l *Limiter) ReserveKeys(ctx context.Context, sink string, keys []string, counts []int, limits []KeyLimit) (map[string][]time.Duration, error) {
	intervals := make([]time.Duration, len(limits))
	byKey := make(map[string]int, len(keys))
	for i, k := range keys {
		intervals[i], byKey[k] = limits[i].Interval, i
	}
	rows, err := l.q.ReserveKeyPermits(ctx, l.pool, sink, keys, counts, intervals)
	if err != nil {
		return nil, fmt.Errorf("outbox: reserve permits of %d keys of sink %q: %w", len(keys), sink, err)
	}
	paused := l.PausedFor(sink)
	waits := make(map[string][]time.Duration, len(keys))
	for _, r := range rows {
		i := byKey[r.Key]
		n, interval := counts[i], limits[i].Interval
		tolerance := time.Duration(limits[i].Burst-1) * interval
		base := r.Tat.Add(-time.Duration(n) * interval)
		w := make([]time.Duration, n)
		for j := range w {
			w[j] = max(paused, base.Add(time.Duration(j)*interval-tolerance).Sub(r.Now))
		}
		waits[r.Key] = w
	}
	return waits, nil
}

// Pause stops sink cluster-wide for d: it records the pause in the
// database (where relays that start later find it) and notifies the running
// relays on channel. A zero pause, or one that ends no later than the pause
// this relay knows of (within pauseGrain), is not written: a storm of 429s
// writes once per change.
func (l *Limiter) Pause(ctx context.Context, sink string, d time.Duration, channel string) error {
	if d <= 0 || !extend(&l.mu, &l.paused, sink, d) {
		return nil
	}
	if err := l.q.PauseSink(ctx, l.pool, sink, d, channel, store.PausePrefix+sink); err != nil {
		return fmt.Errorf("outbox: pause sink %q for %s: %w", sink, d, err)
	}
	return nil
}

// PauseKey holds key, a rate key of sink, for d, cluster-wide, leaving the
// sink's other keys alone: the key's next permits start after it. Like
// Pause it writes nothing for a zero pause or one already known.
func (l *Limiter) PauseKey(ctx context.Context, sink, key string, d time.Duration) error {
	if d <= 0 || !extend(&l.mu, &l.keys, receiver{sink, key}, d) {
		return nil
	}
	if err := l.q.PauseKey(ctx, l.pool, sink, key, d); err != nil {
		return fmt.Errorf("outbox: pause key %q of sink %q for %s: %w", key, sink, d, err)
	}
	return nil
}

// extend records a pause of what for d in *pauses and reports whether it
// ends later, by more than pauseGrain, than the one recorded. The map is
// read under mu: RefreshPauses replaces it whole, and a pause recorded in
// the map it replaced would be lost (and the read of the field raced).
func extend[K comparable](mu *sync.Mutex, pauses *map[K]time.Time, what K, d time.Duration) bool {
	until := time.Now().Add(d)
	mu.Lock()
	defer mu.Unlock()
	if !until.After((*pauses)[what].Add(pauseGrain)) {
		return false
	}
	(*pauses)[what] = until
	return true
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

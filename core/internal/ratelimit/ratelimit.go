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
	ReserveKeyPermits(ctx context.Context, db store.DBTX, sink string, keys []string, counts []int, permits, aheads []time.Duration) ([]store.ReserveKeyPermitsRow, error)
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

// KeyLimit is one limit, a sink's or one rate key's: a permit per
// Interval, at most Burst of them back to back after an idle spell.
type KeyLimit struct {
	Interval time.Duration
	Burst    int
}

// tolerance is how early a permit of l may start: the burst's permits
// after the first start up to Burst-1 intervals before their tat.
func (l KeyLimit) tolerance() time.Duration {
	return time.Duration(max(l.Burst, 1)-1) * l.Interval
}

// ahead is the reservation rule's one bound, the same for a sink's limit
// and a key's: a permit is granted only when it can start within hold,
// that is when its base time is at most hold plus the burst's tolerance
// from now. A permit beyond it would be spent on a row handed back, and
// would push every later permit one interval further: one relay claiming
// a key limited to one message per 10 s every 10 s, with a hold window of
// 7.5 s, pushed it 10 s further each time and never delivered again.
func (l KeyLimit) ahead(hold time.Duration) time.Duration {
	return hold + l.tolerance()
}

// grant turns what a reservation statement returned (granted permits,
// the new tat, the database's now) into waits and the next permit's start.
func (l KeyLimit) grant(granted int, tat, now time.Time) Grant {
	tolerance := l.tolerance()
	g := Grant{Waits: make([]time.Duration, granted), Next: max(0, tat.Add(-tolerance).Sub(now)), Interval: l.Interval}
	first := tat.Add(-time.Duration(granted) * l.Interval)
	for i := range g.Waits {
		g.Waits[i] = max(0, first.Add(time.Duration(i)*l.Interval-tolerance).Sub(now))
	}
	return g
}

// Grant is what a reservation of a sink's or a key's permits gave: a wait
// per permit granted (fewer than asked when the later ones would start
// beyond the hold window, none while the sink is paused), how soon the
// first permit after them starts, the limit's interval and the pause in
// force.
type Grant struct {
	Waits    []time.Duration
	Next     time.Duration
	Interval time.Duration
	Paused   time.Duration
}

// Due is when the nth (from 0) of the rows a reservation did not grant a
// permit may be claimed again so that its permit, should the others
// leave it, can be granted then: when it comes within hold, the permits
// one interval apart. A row handed back due then is not claimed again
// just to be handed back once more.
func (g Grant) Due(n int, hold time.Duration) time.Duration {
	return max(0, g.Next+time.Duration(n)*g.Interval-hold)
}

// Reserve takes up to n permits of sink's limit (one per interval, burst
// back to back after an idle spell), only those that start within hold,
// and returns how long to wait before starting each delivery. The permits
// it does not grant stay for whichever relay claims when they come due.
func (l *Limiter) Reserve(ctx context.Context, sink string, limit KeyLimit, n int, hold time.Duration) (Grant, error) {
	r, err := l.q.ReservePermits(ctx, l.pool, store.ReservePermitsParams{Sink: sink, Count: n, Permit: limit.Interval, Ahead: limit.ahead(hold)})
	if err != nil {
		return Grant{}, fmt.Errorf("outbox: reserve %d permits of sink %q: %w", n, sink, err)
	}
	g := limit.grant(r.Granted, r.Tat, r.Now)
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

// ReserveKeys takes up to counts[i] permits of sink's rate key keys[i],
// each key limited on its own by limits[i], in one statement, by
// Reserve's rule: only the permits that start within hold. keys must be
// sorted and distinct. It returns each key's Grant; a pause of the whole
// sink delays its waits.
func (l *Limiter) ReserveKeys(ctx context.Context, sink string, keys []string, counts []int, limits []KeyLimit, hold time.Duration) (map[string]Grant, error) {
	intervals, aheads := make([]time.Duration, len(limits)), make([]time.Duration, len(limits))
	byKey := make(map[string]int, len(keys))
	for i, k := range keys {
		intervals[i], aheads[i], byKey[k] = limits[i].Interval, limits[i].ahead(hold), i
	}
	rows, err := l.q.ReserveKeyPermits(ctx, l.pool, sink, keys, counts, intervals, aheads)
	if err != nil {
		return nil, fmt.Errorf("outbox: reserve permits of %d keys of sink %q: %w", len(keys), sink, err)
	}
	paused := l.PausedFor(sink)
	grants := make(map[string]Grant, len(keys))
	for _, r := range rows {
		g := limits[byKey[r.Key]].grant(r.Granted, r.Tat, r.Now)
		for j, w := range g.Waits {
			g.Waits[j] = max(paused, w)
		}
		grants[r.Key] = g
	}
	return grants, nil
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

// KeyPausedFor returns how much longer key, a rate key of sink, is paused
// by a Retry-After this relay was answered (0 when it is not): a permit
// reserved before the 429 came back must not be used inside the pause.
// Other relays learn of the pause at their next reservation (the key's
// schedule moved past it).
func (l *Limiter) KeyPausedFor(sink, key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := receiver{sink, key}
	left := time.Until(l.keys[id])
	if left <= 0 {
		delete(l.keys, id)
		return 0
	}
	return left
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

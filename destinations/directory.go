package destinations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/standardwebhooks"
)

// Timing of a Directory.
const (
	// DefaultBackstop is how often a Directory rereads the state of the
	// destinations when no notification came: a lost notification (a
	// dropped connection) delays a change by at most this long.
	DefaultBackstop = 500 * time.Millisecond
	// listenRetry is the pause before listening again after the listening
	// connection failed.
	listenRetry = time.Second
	// ParkDelay is how soon after ParkSoon a disabled destination's rows
	// are parked: the relay has written the outcome of the delivery that
	// asked by then. The destinations sink hands such a row back for
	// twice as long, so it is pending, not yet due, when the park comes.
	ParkDelay = DefaultBackstop
	// parkTimeout bounds one park's statement.
	parkTimeout = 10 * time.Second
)

// Live is a destination as a relay delivers to it.
type Live struct {
	ID        string
	Tenant    string
	URL       string
	Enabled   bool
	RateLimit *float64
	// Revision is the destinations' revision of its last change: what
	// Clients builds its client again on.
	Revision int64
	secrets  []standardwebhooks.Secret
	expires  []time.Time
	// auth is how its requests authenticate besides the signature.
	auth Auth
	// err is why its secrets could not be opened (a key missing from
	// EnvSecretsKey): deliveries fail with it, and are retried.
	err error
}

// Endpoint is where and how to post to l at now: its URL and every secret
// still signing (during a rotation, the new one and the old one).
func (l *Live) Endpoint(now time.Time) (standardwebhooks.Endpoint, error) {
	if l.err != nil {
		return standardwebhooks.Endpoint{}, l.err
	}
	e := standardwebhooks.Endpoint{URL: l.URL}
	for i, s := range l.secrets {
		if now.Before(l.expires[i]) {
			e.Secrets = append(e.Secrets, s)
		}
	}
	return e, nil
}

// Directory is one process's view of the destinations of an outbox,
// kept current by Run: a change committed anywhere reaches it within a
// notification's round trip, and within DefaultBackstop without one.
// Lookups never touch the database. It is safe for concurrent use.
type Directory struct {
	pool     *pgxpool.Pool
	q        *store.Queries
	keys     *Keyring
	log      *slog.Logger
	channel  string
	backstop time.Duration

	refreshMu sync.Mutex // one refresh at a time
	mu        sync.RWMutex
	byID      map[string]*Live
	revision  int64
	deletions int64
	loaded    bool
	readAt    time.Time // database time of the last read: it holds every change committed before

	parkMu  sync.Mutex
	parking map[string]bool // destinations with a park scheduled
}

// NewDirectory returns the Directory of q's outbox schema, read through
// pool, opening secrets with keys. Programs get theirs from the front door
// (outboxd.Outbox.Directory).
func NewDirectory(pool *pgxpool.Pool, q *store.Queries, keys *Keyring, log *slog.Logger) (*Directory, error) {
	if keys == nil {
		return nil, ErrNoKeyring
	}
	return &Directory{pool: pool, q: q, keys: keys, log: log, channel: "outboxd_destinations_" + q.Schema,
		backstop: DefaultBackstop, byID: map[string]*Live{}, parking: map[string]bool{}}, nil
}

// Lookup returns destination id as last read.
func (d *Directory) Lookup(id string) (*Live, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	l, ok := d.byID[id]
	return l, ok
}

// Find returns destination id, reading the destinations again first
// when it is not known: a row can reach a relay before the notification
// of its destination's creation does.
func (d *Directory) Find(ctx context.Context, id string) (*Live, bool, error) {
	if l, ok := d.Lookup(id); ok {
		return l, true, nil
	}
	return d.Reread(ctx, id)
}

// FindAtRevision returns destination id as it stood at least at
// revision, the destinations' revision a row's producer saw (the row's
// RevisionHeader), reading what changed first when d has read less:
// revisions are handed out in the order changes commit, so a change
// committed before the row (a rotated secret, an edited URL, an enable)
// applies to it, even when the row's notification reached the relay
// before the change's did. A directory that has read the revision
// answers from memory, as it almost always has under steady load.
func (d *Directory) FindAtRevision(ctx context.Context, id string, revision int64) (*Live, bool, error) {
	return d.findFresh(ctx, id, func() bool { return d.holdsRevision(revision) })
}

// FindAsOf is FindAtRevision for a row that carries no revision (made
// before migration 025): it holds the changes committed before the row
// was enqueued at enqueued (database clock) when d's last read began
// after it, and reads them first otherwise. Under steady load nearly
// every row is newer than the last read, and each delivery waits for a
// read.
func (d *Directory) FindAsOf(ctx context.Context, id string, enqueued time.Time) (*Live, bool, error) {
	return d.findFresh(ctx, id, func() bool { return d.readSince(enqueued) })
}

// findFresh returns destination id, reading what changed first unless
// fresh says d holds what the caller needs. Deliveries waiting for the
// same read share it.
func (d *Directory) findFresh(ctx context.Context, id string, fresh func() bool) (*Live, bool, error) {
	if fresh() {
		return d.Find(ctx, id)
	}
	if err := d.refreshUnless(ctx, fresh); err != nil {
		return nil, false, err
	}
	l, ok := d.Lookup(id)
	return l, ok, nil
}

// holdsRevision reports whether d has read the destinations' revision
// rev.
func (d *Directory) holdsRevision(rev int64) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.loaded && d.revision >= rev
}

// readSince reports whether d's last read began after t (database clock).
func (d *Directory) readSince(t time.Time) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.loaded && d.readAt.After(t)
}

// Reread returns destination id as the database has it now, reading what
// changed first: for what the last read must not decide alone, such as
// turning a row away because its destination was disabled when the
// enable that made the row due may not have reached d yet.
func (d *Directory) Reread(ctx context.Context, id string) (*Live, bool, error) {
	if err := d.Refresh(ctx); err != nil {
		return nil, false, err
	}
	l, ok := d.Lookup(id)
	return l, ok, nil
}

// Len is how many destinations the directory holds.
func (d *Directory) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.byID)
}

// Refresh reads what changed since the last read: the destinations whose
// revision moved, or all of them after a deletion.
func (d *Directory) Refresh(ctx context.Context) error {
	return d.refreshUnless(ctx, nil)
}

// refreshUnless is Refresh, skipped when current (nil: never) holds once
// the refreshes before it are done: a read that began while it waited
// may have read what it needs.
func (d *Directory) refreshUnless(ctx context.Context, current func() bool) error {
	db := d.pool
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	if current != nil && current() {
		return nil
	}
	st, err := d.q.DestinationsState(ctx, db)
	if err != nil {
		return fmt.Errorf("destinations: read their state: %w", err)
	}
	d.mu.Lock()
	full := !d.loaded || st.Deletions != d.deletions
	since := d.revision
	unchanged := !full && st.Revision == d.revision
	if unchanged {
		d.readAt = st.ReadAt
	}
	d.mu.Unlock()
	if unchanged {
		return nil
	}
	if full {
		since = 0
	}
	rows, err := d.q.DestinationsSince(ctx, db, since)
	if err != nil {
		return fmt.Errorf("destinations: read the changed ones: %w", err)
	}
	fresh := make(map[string]*Live, len(rows))
	for _, r := range rows {
		l := &Live{ID: r.ID, Tenant: r.Tenant, URL: r.URL, Enabled: r.Enabled, RateLimit: r.RateLimit, Revision: r.Revision, expires: r.ExpiresAt}
		for i, sealed := range r.Sealed {
			plain, err := d.keys.Open(r.KeyIDs[i], r.ID, sealed)
			if err == nil {
				var s standardwebhooks.Secret
				if s, err = standardwebhooks.ParseSecret(string(plain)); err != nil {
					err = fmt.Errorf("destination %s: its secret does not parse: %w", r.ID, err)
				}
				l.secrets = append(l.secrets, s)
			}
			if err != nil {
				l.err = err
				d.log.Error("outbox: a destination's signing secret cannot be opened; its deliveries fail until it can", "destination", r.ID, "error", err)
				break
			}
		}
		d.openAuth(l, r.AuthKeyID, r.AuthSealed)
		fresh[r.ID] = l
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if full {
		d.byID = fresh
	} else {
		for id, l := range fresh {
			d.byID[id] = l
		}
	}
	// The state read first may be older than the rows: the next refresh
	// reads the rows after it again, which is harmless.
	d.revision, d.deletions, d.loaded, d.readAt = st.Revision, st.Deletions, true, st.ReadAt
	return nil
}

// ParkSoon parks, after ParkDelay, the rows of destination id that wait
// unparked while it is disabled (destination_park.sql): a row in flight
// when it was disabled, or published as it was. Its sink calls it when
// such a row reaches it; the row's outcome is written by then. A park
// already scheduled for id covers a second call. It never blocks.
func (d *Directory) ParkSoon(id string) {
	d.parkMu.Lock()
	defer d.parkMu.Unlock()
	if d.parking[id] {
		return
	}
	d.parking[id] = true
	time.AfterFunc(ParkDelay, func() {
		d.parkMu.Lock()
		delete(d.parking, id)
		d.parkMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), parkTimeout)
		defer cancel()
		if _, err := d.q.DestinationPark(ctx, d.pool, id); err != nil {
			d.log.Warn("outbox: parking the rows of a disabled destination failed; its sink asks again when one comes back", "destination", id, "error", err)
		}
	})
}

// Run keeps d current until ctx ends: it listens for the notification
// of every change on a connection of its pool and refreshes then, and every
// DefaultBackstop in any case.
func (d *Directory) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := d.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("outbox: listening for destination changes failed; polling until it works again", "error", err)
		d.poll(ctx, listenRetry)
	}
}

// listen refreshes on each notification, and after each backstop
// interval without one, until the connection fails or ctx ends.
func (d *Directory) listen(ctx context.Context) error {
	pooled, err := d.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A listening connection must not go back to the pool still listening.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel}.Sanitize()); err != nil {
		return err
	}
	for {
		if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("outbox: reading destinations failed", "error", err)
		}
		wait, cancel := context.WithTimeout(ctx, d.backstop)
		_, err := conn.WaitForNotification(wait)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// poll refreshes every backstop interval for a while.
func (d *Directory) poll(ctx context.Context, period time.Duration) {
	t := time.NewTimer(period)
	defer t.Stop()
	if err := d.Refresh(ctx); err != nil && ctx.Err() == nil {
		d.log.Warn("outbox: reading destinations failed", "error", err)
	}
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

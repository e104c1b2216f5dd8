package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// Versions are the routes applied to one outbox schema, version by
// version: Apply makes a table the active version, Active reads which one
// is, Fallback reads any version's targets for a relay stage. It holds no
// connection and is safe for concurrent use. Programs get theirs from the
// front door (outboxd.Outbox.Routes), which makes the one store and audit
// trail its engine shares.
type Versions struct {
	q     *store.Queries
	trail *audit.Trail
}

// NewVersions returns the Versions of q's outbox schema, recording applies
// in trail.
func NewVersions(q *store.Queries, trail *audit.Trail) *Versions {
	return &Versions{q: q, trail: trail}
}

// Applied is what Apply did.
type Applied struct {
	// Version is the routes' version number in the database.
	Version int64
	// Changed is false when these routes were already the active ones.
	Changed bool
}

// Apply makes t the routes that publish() uses in v's schema, in one
// statement: a new version, unless the same routes (by Digest) were
// applied before, in which case that version becomes active again.
// Applying the active routes again changes nothing, so every deploy may
// run it, from several pods at once under any default isolation level.
// Publishes in flight keep the version they started with; the next ones
// use t. Routes that change the active version are recorded in the audit
// trail as actor's, in the same transaction.
func (v *Versions) Apply(ctx context.Context, db store.DBTX, t *Table, actor audit.Actor) (Applied, error) {
	targets, err := json.Marshal(t.applied())
	if err != nil {
		return Applied{}, fmt.Errorf("routing: encode routes: %w", err)
	}
	var r store.ApplyRoutesRow
	apply := func(db store.DBTX) (err error) {
		if r, err = v.q.ApplyRoutes(ctx, db, t.Digest(), t.unmatched, targets); err != nil || !r.Changed {
			return err
		}
		return v.trail.Write(ctx, db, actor, audit.Record{Action: audit.ActionRoutesApply, Count: int64(len(t.Routes())),
			Detail: map[string]any{"version": r.Version, "digest": t.Digest()}})
	}
	// apply_routes() waits for the active version's row lock and then reads
	// what the previous holder committed: READ COMMITTED, whatever the
	// database's default isolation (see store.ReadCommitted).
	if b, ok := db.(store.Beginner); ok {
		err = store.ReadCommitted(ctx, b, func(tx pgx.Tx) error { return apply(tx) })
	} else {
		err = apply(db)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("routing: apply routes to schema %s: %w", v.q.Schema, err)
	}
	return Applied{Version: r.Version, Changed: r.Changed}, nil
}

// Active returns the version and digest of the routes publish() uses in
// v's schema; version 0 when none were ever applied. A relay whose
// configuration's Digest differs renders with its own templates but routes
// what the database says: serve warns about it.
func (v *Versions) Active(ctx context.Context, db store.DBTX) (version int64, digest string, err error) {
	r, err := v.q.ActiveRoutes(ctx, db)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("routing: read the active routes of schema %s: %w", v.q.Schema, err)
	}
	return r.Version, r.Digest, nil
}

// ErrNoTarget is wrapped by a Fallback's error when no applied routes ever
// had the target.
var ErrNoTarget = errors.New("no such route target was ever applied")

// StoredTarget is a route target as the database has it.
type StoredTarget struct {
	// Digest is the digest of the routes version the target belongs to;
	// set by VersionTarget only.
	Digest     string
	Template   map[string]string
	UpdateRoot bool
}

// Fallback finds a route target as the database has it, for the rows the
// relay's own templates must not render: during a rolling deploy, rows
// published under another routes version than the relay's configuration
// (a template the deploy changed), rows of a route added by the new
// configuration reaching relays still running the old one, and rows of a
// route it removed reaching relays running the new one.
type Fallback interface {
	// VersionTarget returns route's target sink under routes version
	// version, with the version's digest.
	VersionTarget(ctx context.Context, version int64, route, sink string) (StoredTarget, error)
	// Target returns route's target sink as last applied, for a row that
	// does not name its version (published before versions were recorded).
	Target(ctx context.Context, route, sink string) (StoredTarget, error)
}

// Fallback is the Fallback that reads the routes applied to v's schema
// through db: what a relay stage (Table.Stage) of a program that applies
// its routes to the database is given.
func (v *Versions) Fallback(db store.DBTX) Fallback {
	return dbFallback{db: db, q: v.q}
}

type dbFallback struct {
	db store.DBTX
	q  *store.Queries
}

func (f dbFallback) VersionTarget(ctx context.Context, version int64, route, sink string) (StoredTarget, error) {
	r, err := f.q.VersionTarget(ctx, f.db, version, route, sink)
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredTarget{}, fmt.Errorf("routes version %d, route %s, sink %s: %w", version, route, sink, ErrNoTarget)
	}
	if err != nil {
		return StoredTarget{}, fmt.Errorf("routes version %d, route %s, sink %s: read the applied routes: %w", version, route, sink, err)
	}
	st, err := storedTarget(r.Template, r.UpdateRoot)
	st.Digest = r.Digest
	if err != nil {
		return StoredTarget{}, fmt.Errorf("routes version %d, route %s, sink %s: %w", version, route, sink, err)
	}
	return st, nil
}

// Target reads the active version's target, else the latest version's
// that had it.
func (f dbFallback) Target(ctx context.Context, route, sink string) (StoredTarget, error) {
	r, err := f.q.AppliedTarget(ctx, f.db, route, sink)
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredTarget{}, fmt.Errorf("route %s, sink %s: %w", route, sink, ErrNoTarget)
	}
	if err != nil {
		return StoredTarget{}, fmt.Errorf("route %s, sink %s: read the applied routes: %w", route, sink, err)
	}
	st, err := storedTarget(r.Template, r.UpdateRoot)
	if err != nil {
		return StoredTarget{}, fmt.Errorf("route %s, sink %s: %w", route, sink, err)
	}
	return st, nil
}

// storedTarget decodes a route_targets row's template.
func storedTarget(template []byte, updateRoot bool) (StoredTarget, error) {
	st := StoredTarget{UpdateRoot: updateRoot}
	if len(template) > 0 {
		if err := json.Unmarshal(template, &st.Template); err != nil {
			return StoredTarget{}, fmt.Errorf("the applied template: %w", err)
		}
	}
	return st, nil
}

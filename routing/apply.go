package routing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/store"
)

// queries returns the statements of the outbox in schema; routing's own
// (apply_routes, active_routes, applied_target) live with the others in the
// store.
func queries(schema string) (*store.Queries, error) {
	q, err := store.New(schema)
	if err != nil {
		return nil, fmt.Errorf("routing: %w", err)
	}
	return q, nil
}

// Applied is what Apply did.
type Applied struct {
	// Version is the routes' version number in the database.
	Version int64
	// Changed is false when these routes were already the active ones.
	Changed bool
}

// Apply makes t the routes that publish() uses in schema, in one
// statement: a new version, unless the same routes (by Digest) were
// applied before, in which case that version becomes active again.
// Applying the active routes again changes nothing, so every deploy may
// run it, from several pods at once under any default isolation level. Publishes in flight keep the version they started with; the next
// ones use t.
func Apply(ctx context.Context, db core.DBTX, schema string, t *Table) (Applied, error) {
	q, err := queries(schema)
	if err != nil {
		return Applied{}, err
	}
	targets, err := json.Marshal(t.applied())
	if err != nil {
		return Applied{}, fmt.Errorf("routing: encode routes: %w", err)
	}
	var r store.ApplyRoutesRow
	apply := func(db core.DBTX) (err error) {
		r, err = q.ApplyRoutes(ctx, db, t.Digest(), t.unmatched, targets)
		return err
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
		return Applied{}, fmt.Errorf("routing: apply routes to schema %s: %w", schema, err)
	}
	return Applied{Version: r.Version, Changed: r.Changed}, nil
}

// Active returns the version and digest of the routes publish() uses in
// ob's schema; version 0 when none were ever applied. A relay whose
// configuration's Digest differs renders with its own templates but routes
// what the database says: serve warns about it.
func Active(ctx context.Context, db core.DBTX, schema string) (version int64, digest string, err error) {
	q, err := queries(schema)
	if err != nil {
		return 0, "", err
	}
	r, err := q.ActiveRoutes(ctx, db)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("routing: read the active routes of schema %s: %w", schema, err)
	}
	return r.Version, r.Digest, nil
}

// ErrNoTarget is wrapped by a Fallback's error when no applied routes ever
// had the target.
var ErrNoTarget = errors.New("no such route target was ever applied")

// Fallback finds a route target that the relay's configuration lacks, as
// the database has it: during a rolling deploy, rows of a route added by
// the new configuration reach relays still running the old one, and rows
// of a route it removed reach relays running the new one.
type Fallback interface {
	Target(ctx context.Context, route, sink string) (template map[string]string, updateRoot bool, err error)
}

// DBFallback is the Fallback that reads the routes applied to schema
// through db: the active version's target, else the latest version's that
// had it.
func DBFallback(db core.DBTX, schema string) (Fallback, error) {
	q, err := queries(schema)
	if err != nil {
		return nil, err
	}
	return dbFallback{db: db, q: q}, nil
}

type dbFallback struct {
	db core.DBTX
	q  *store.Queries
}

func (f dbFallback) Target(ctx context.Context, route, sink string) (map[string]string, bool, error) {
	r, err := f.q.AppliedTarget(ctx, f.db, route, sink)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("route %s, sink %s: %w", route, sink, ErrNoTarget)
	}
	if err != nil {
		return nil, false, fmt.Errorf("route %s, sink %s: read the applied routes: %w", route, sink, err)
	}
	var tmpl map[string]string
	if len(r.Template) > 0 {
		if err := json.Unmarshal(r.Template, &tmpl); err != nil {
			return nil, false, fmt.Errorf("route %s, sink %s: the applied template: %w", route, sink, err)
		}
	}
	return tmpl, r.UpdateRoot, nil
}

package destinations

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// MaxRecoverRows bounds how many events one recovery re-sends: a window
// holding more is refused (narrow it with until), so that a tenant's
// portal cannot queue a flood in one click, and the statement that moves
// them stays short.
const MaxRecoverRows = 100_000

// Recovery selects the events of a destination to send again: those
// created in [Since, Until) (Until nil: up to now) that died, and with
// IncludeDelivered those delivered too, while the history keeps them
// (history.retention).
type Recovery struct {
	Since            time.Time
	Until            *time.Time
	IncludeDelivered bool
}

// RecoverCount is what a recovery would send again, and the token that
// confirms sending exactly those, as a dead-letter action's dry run
// names the rows it counted.
type RecoverCount struct {
	Dead      int64  `json:"dead"`
	Delivered int64  `json:"delivered"`
	Rows      int64  `json:"rows"`
	Token     string `json:"token"`
}

// ErrRecoveryChanged is wrapped by Recover's error when its token no
// longer names the window's events (one died, was delivered or left the
// history since the count): nothing was sent again, and the RecoverCount
// returned is the new count with its token.
var ErrRecoveryChanged = errors.New("destinations: the events to recover changed since they were counted")

// check refuses a window that names nothing.
func (r Recovery) check() error {
	switch {
	case r.Since.IsZero():
		return inputErrorf("since: required: the time from which to send events again")
	case r.Until != nil && !r.Until.After(r.Since):
		return inputErrorf("until: must be after since")
	}
	return nil
}

// CountRecover counts what recovering destination id of tenant over r
// would send again, and sends nothing. A window holding more than
// MaxRecoverRows events is refused with an *InputError.
func (s *Store) CountRecover(ctx context.Context, db DB, tenant, id string, r Recovery) (RecoverCount, error) {
	if err := r.check(); err != nil {
		return RecoverCount{}, err
	}
	c, err := s.recover(ctx, db, tenant, id, r, true, "")
	if err != nil {
		return RecoverCount{}, err
	}
	if c.Rows > MaxRecoverRows {
		return RecoverCount{}, inputErrorf("since: the window holds %d events, over the limit of %d a recovery sends: narrow it with until", c.Rows, MaxRecoverRows)
	}
	return c, nil
}

// Recover sends again, as actor's, the events of destination id of
// tenant that r selects, if token (CountRecover's) still names them:
// dead rows go back to pending, delivered ones back from the history into
// the queue under their ids and dedup keys, so each carries the delivery
// id (webhook-id) it had, and a receiver drops what it already has. When
// the events changed since the count, it sends nothing and returns the
// new count with an error wrapping ErrRecoveryChanged; a token of no
// events is an *InputError. The recovery is in the audit trail.
func (s *Store) Recover(ctx context.Context, db DB, actor audit.Actor, tenant, id string, r Recovery, token string) (RecoverCount, error) {
	if err := r.check(); err != nil {
		return RecoverCount{}, err
	}
	if err := checkDeleteToken(token); err != nil {
		return RecoverCount{}, err
	}
	if rows, _, _ := strings.Cut(token, "."); rows == "0" {
		return RecoverCount{}, inputErrorf("token: the count found nothing to recover between since and until")
	}
	var done RecoverCount
	err := s.trail.Do(ctx, db, actor, func(tx pgx.Tx) (audit.Record, bool, error) {
		var err error
		if done, err = s.recover(ctx, tx, tenant, id, r, false, token); err != nil {
			return audit.Record{}, false, err
		}
		detail := map[string]any{"since": r.Since, "until": r.Until, "include_delivered": r.IncludeDelivered,
			"dead": done.Dead, "delivered": done.Delivered}
		return audit.Record{Action: audit.ActionDestinationRecover, Filter: target{tenant, id}, Count: done.Rows, Detail: detail}, true, nil
	})
	return done, err
}

// recover runs destination_recover.sql: a count (dryRun) or the moves
// that token confirms.
func (s *Store) recover(ctx context.Context, db store.DBTX, tenant, id string, r Recovery, dryRun bool, token string) (RecoverCount, error) {
	_, digest, _ := strings.Cut(token, ".")
	row, err := s.q.DestinationRecover(ctx, db, store.DestinationRecoverParams{Tenant: tenant, ID: id, Since: r.Since, Until: r.Until,
		IncludeDelivered: r.IncludeDelivered, DryRun: dryRun, Digest: digest})
	if err != nil {
		return RecoverCount{}, fmt.Errorf("destinations: recover %s of tenant %s: %w", id, tenant, err)
	}
	if row.Found == 0 {
		return RecoverCount{}, ErrNotFound
	}
	c := RecoverCount{Dead: row.Dead, Delivered: row.Delivered, Rows: row.Dead + row.Delivered}
	c.Token = strconv.FormatInt(c.Rows, 10) + "." + row.Digest
	if row.Changed {
		return c, ErrRecoveryChanged
	}
	return c, nil
}

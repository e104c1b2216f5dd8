package destinations

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/internal/store"
)

// DeleteCount is what deleting a destination would take: the rows still
// waiting for it, and the token that confirms deleting exactly those, as
// a dead-letter action's dry run names the rows it counted.
type DeleteCount struct {
	Rows  int64  `json:"rows"`
	Token string `json:"token"`
}

// ErrCountChanged is wrapped by DeleteCounted's error when its token no
// longer names the destination's waiting rows (a row arrived or left, or
// the destination changed, since the count): nothing was deleted, and the
// DeleteCount returned is the new count with its token.
var ErrCountChanged = errors.New("destinations: the destination or its waiting rows changed since they were counted")

// ErrInvalidToken is wrapped by DeleteCounted's error for a token no
// CountDelete returned.
var ErrInvalidToken = errors.New("destinations: not the token of a count")

// CountDelete counts what deleting destination id of tenant would take,
// and deletes nothing.
func (s *Store) CountDelete(ctx context.Context, db DB, tenant, id string) (DeleteCount, error) {
	r, err := s.q.DestinationDeleteCount(ctx, db, tenant, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeleteCount{}, ErrNotFound
	}
	if err != nil {
		return DeleteCount{}, fmt.Errorf("destinations: count what deleting %s of tenant %s takes: %w", id, tenant, err)
	}
	return DeleteCount{Rows: r.Rows, Token: deleteToken(r)}, nil
}

// deleteToken spells a count as "<rows>.<digest>".
func deleteToken(r store.DestinationDeleteCountRow) string {
	return strconv.FormatInt(r.Rows, 10) + "." + r.Digest
}

// checkDeleteToken refuses what deleteToken cannot have made.
func checkDeleteToken(token string) error {
	rows, digest, ok := strings.Cut(token, ".")
	if _, err := strconv.ParseUint(rows, 10, 63); !ok || err != nil || len(digest) != 32 || strings.Trim(digest, "0123456789abcdef") != "" {
		return fmt.Errorf("token %q: %w", token, ErrInvalidToken)
	}
	return nil
}

// DeleteCounted deletes destination id of tenant with its secrets, its
// circuit breakers and the rows still waiting for it, as actor's, if
// token (CountDelete's) still names what deleting it takes; otherwise it
// deletes nothing and returns the new count with an error wrapping
// ErrCountChanged. The check and the delete hold the destination's lock,
// and a delete that took other rows than those counted rolls back.
func (s *Store) DeleteCounted(ctx context.Context, db DB, actor audit.Actor, tenant, id, token string) (DeleteCount, error) {
	if err := checkDeleteToken(token); err != nil {
		return DeleteCount{}, err
	}
	var now DeleteCount
	err := store.ReadCommitted(ctx, db, func(tx pgx.Tx) error {
		if n, err := s.q.DestinationLock(ctx, tx, tenant, id); err != nil {
			return fmt.Errorf("destinations: lock %s of tenant %s: %w", id, tenant, err)
		} else if n == 0 {
			return ErrNotFound
		}
		var err error
		if now, err = s.CountDelete(ctx, tx, tenant, id); err != nil {
			return err
		}
		if now.Token != token {
			return ErrCountChanged
		}
		rows, err := s.delete(ctx, tx, actor, tenant, id)
		if err == nil && rows != now.Rows {
			// A relay claimed a counted row between the count and the
			// delete: roll back, and count again below.
			return errRowsMoved
		}
		return err
	})
	if errors.Is(err, errRowsMoved) {
		if now, err = s.CountDelete(ctx, db, tenant, id); err != nil {
			return DeleteCount{}, err
		}
		return now, ErrCountChanged
	}
	return now, err
}

// errRowsMoved rolls back a delete that took other rows than it counted.
var errRowsMoved = fmt.Errorf("the waiting rows moved during the delete: %w", ErrCountChanged)

package core

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// ClaimQuery exposes the shared claim statement to the EXPLAIN test.
func (o *Outbox) ClaimQuery() string { return o.sql.claimAll }

// ClaimAndAbandon claims up to limit rows the way a relay does and then
// drops them, like a relay that dies before writing any outcome.
func (o *Outbox) ClaimAndAbandon(ctx context.Context, db DBTX, limit int, lease time.Duration) (int, error) {
	rows, err := db.Query(ctx, o.sql.claimAll, limit, lease, []string{}, uuid.New())
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

package destinations

import (
	"context"
	"fmt"
)

// MaxDeadRows bounds how many dead rows DeadRows returns at once: one
// redrive's worth.
const MaxDeadRows = MaxPageSize

// DeadRows returns the ids of the dead rows of destination id of tenant,
// oldest first, at most MaxDeadRows; only row message unless it is 0. A
// destination the tenant does not have is ErrNotFound. Redriving these
// ids (operator.Operator.Redrive) redrives only what is the tenant's own.
func (s *Store) DeadRows(ctx context.Context, db DB, tenant, id string, message int64) ([]int64, error) {
	r, err := s.q.DestinationDeadRows(ctx, db, tenant, id, message, MaxDeadRows)
	if err != nil {
		return nil, fmt.Errorf("destinations: the dead rows of %s of tenant %s: %w", id, tenant, err)
	}
	if r.Found == 0 {
		return nil, ErrNotFound
	}
	return r.IDs, nil
}

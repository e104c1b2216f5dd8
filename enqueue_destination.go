package outboxd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// EnqueueDestination stores msg for one destination in the default
// outbox. See [Outbox.EnqueueDestination].
func EnqueueDestination(ctx context.Context, db DBTX, destination string, msg Message) (EnqueueResult, error) {
	return defaultOutbox().EnqueueDestination(ctx, db, destination, msg)
}

// EnqueueDestination stores msg for destination, the id (dst_...) of one
// of the tenants' destinations (package destinations, docs/destinations.md),
// in db: pass the caller's pgx.Tx to make it part of that transaction, as
// Enqueue. msg.Sink must be a sink of type destinations, which signs the
// delivery with the destination's secrets; the delivery id (webhook-id) is
// the sink and msg.DedupKey. It is the way to send one destination a
// message of its own (a welcome, a notice) rather than publishing an event
// to every destination of a tenant.
//
// It runs the SQL function enqueue_destination(), so every producer meets
// the same rules: the row carries the destination, waits without spending
// attempts while the destination is disabled (and is due once it is
// enabled), is ordered per destination when msg.OrderingKey is set, and
// a destination that does not exist is refused with an error wrapping
// ErrInvalidMessage. The message is validated as Enqueue validates it;
// enqueue_destination() takes no first-attempt time and no attempt limit,
// so a msg with AvailableAt or MaxAttempts set is refused too.
func (o *Outbox) EnqueueDestination(ctx context.Context, db DBTX, destination string, msg Message) (EnqueueResult, error) {
	switch {
	case !msg.AvailableAt.IsZero():
		return EnqueueResult{}, invalid("a message for a destination cannot be delayed (enqueue_destination() takes no available_at)")
	case msg.MaxAttempts != 0:
		return EnqueueResult{}, invalid("a message for a destination takes its sink's max attempts (enqueue_destination() takes no max_attempts)")
	}
	v, err := o.validate(ctx, msg)
	if err != nil {
		return EnqueueResult{}, err
	}
	row, err := o.q.EnqueueDestination(ctx, db, v.sink, destination, v.dedupKey, v.payload, v.orderingKey, v.headers)
	if err != nil {
		if refused := classifyEnqueueError(err); refused != nil {
			return EnqueueResult{}, refused
		}
		return EnqueueResult{}, fmt.Errorf("outbox: enqueue %s/%s for destination %s: %w", v.sink, v.dedupKey, destination, err)
	}
	o.countEnqueues(ctx, v.sink, row.Created, 1)
	return EnqueueResult{ID: row.ID, Created: row.Created}, nil
}

// invalidMessagePrefix starts the message of every refusal of the SQL
// functions enqueue() and enqueue_destination().
const invalidMessagePrefix = "outbox: invalid message: "

// classifyEnqueueError turns a refusal of enqueue_destination() (or of the
// enqueue() it calls) into an error wrapping ErrInvalidMessage, worded as
// the function worded it; nil for any other error.
func classifyEnqueueError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstateInvalidParameter && strings.HasPrefix(pgErr.Message, invalidMessagePrefix) {
		return &eventError{kind: ErrInvalidMessage, msg: pgErr.Message}
	}
	return nil
}

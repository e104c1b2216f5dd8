package relay

import (
	"context"

	"github.com/outboxd/outboxd/core/sink"
)

// Stage prepares a claimed row's delivery before the relay uses it: before
// RateKey (for a per-key rate limit), Deliver and DeliverBatch. It
// may rewrite d (its Payload, say); it must not keep d. ctx is the
// delivery's own context, carrying its span and a deadline inside the
// row's lease. An error is the delivery's outcome, classified as a sink's
// would be: wrap it with [sink.Permanent] when retrying cannot help.
//
// The relay runs the stage once per attempt, for every row, so a stage
// that has nothing to do for a row (routing, for a message enqueued
// directly) returns nil at once.
type Stage interface {
	Prepare(ctx context.Context, sinkName string, d *sink.Delivery) error
}

// prepare runs the configured stage for row, once per attempt, under ctx,
// which carries the delivery's deadline (see claimDeadline).
func (r *Relay) prepare(ctx context.Context, row *claimedRow) error {
	if r.cfg.Stage == nil || row.prepared {
		return nil
	}
	row.prepared = true
	return r.cfg.Stage.Prepare(ctx, row.Sink, &row.Delivery)
}

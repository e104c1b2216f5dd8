package nats

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/sinks"
)

var _ sinks.BatchSink = (*Sink)(nil)

// DeliverBatch publishes ds asynchronously, so their acknowledgements
// travel together instead of one round trip each, and then waits for
// every one (see [sinks.BatchSink]; the relay does not call it yet).
// Each message is what Deliver would publish, under the same Nats-Msg-Id.
// At most max_in_flight publishes are outstanding at once.
func (s *Sink) DeliverBatch(ctx context.Context, ds []*core.Delivery) []error {
	return sinks.DeliverInChunks(ds, s.cfg.MaxInFlight, func(ds []*core.Delivery, errs []error) {
		s.deliverChunk(ctx, ds, errs)
	})
}

// deliverChunk publishes at most max_in_flight messages and waits for
// them; errs receives their outcomes.
func (s *Sink) deliverChunk(ctx context.Context, ds []*core.Delivery, errs []error) {
	if err := s.inFlight.Acquire(ctx, int64(len(ds))); err != nil {
		copy(errs, sinks.FailAll(ds, s.wrap(fmt.Errorf("waiting for free publish slots: %w", err))))
		return
	}
	defer s.inFlight.Release(int64(len(ds)))
	c, err := s.conn.Get(ctx)
	if err != nil {
		copy(errs, sinks.FailAll(ds, s.wrap(err)))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	futures := make([]jetstream.PubAckFuture, len(ds))
	for i, d := range ds {
		msg, err := s.message(ctx, d)
		if err != nil {
			errs[i] = s.wrap(core.Permanent(err))
			continue
		}
		if futures[i], err = c.js.PublishMsgAsync(msg, s.publishOptions(d)...); err != nil {
			errs[i] = s.wrap(s.classify(ctx, c, msg.Subject, err))
		}
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			errs[i] = ds[i].SetReceipt(Receipt{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate})
		case err := <-f.Err():
			errs[i] = s.wrap(s.classify(ctx, c, f.Msg().Subject, err))
		case <-ctx.Done():
			errs[i] = s.wrap(fmt.Errorf("no acknowledgement: %w", ctx.Err()))
		}
	}
}

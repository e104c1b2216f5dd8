package rabbitmq

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/sinks"
)

var _ sinks.BatchSink = (*Sink)(nil)

// DeliverBatch publishes ds back to back on the sink's channel and then
// waits for their confirms, which the broker sends as they come (often one
// basic.ack for many), instead of one round trip each (see
// [sinks.BatchSink]; the relay does not call it yet). Each message is what
// Deliver would publish. At most max_in_flight publishes are outstanding
// at once.
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
	p, err := s.conn.Get(ctx)
	if err != nil {
		copy(errs, sinks.FailAll(ds, s.wrap(err)))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	pending := make([]*pendingPublish, len(ds))
	keys := make([]string, len(ds))
	for i, d := range ds {
		if keys[i], err = s.cfg.routingKey.Render(s.name, d); err != nil {
			errs[i] = s.wrap(core.Permanent(err))
			continue
		}
		msg := s.message(ctx, d)
		pp := &pendingPublish{messageID: msg.MessageId, done: make(chan error, 1)}
		if _, err := p.send(ctx, s.cfg.Exchange, keys[i], msg, pp); err != nil {
			errs[i] = s.wrap(classify(err))
			continue
		}
		pending[i] = pp
	}
	for i, pp := range pending {
		if pp == nil {
			continue
		}
		select {
		case err := <-pp.done:
			if err != nil {
				errs[i] = s.wrap(classify(err))
				continue
			}
			errs[i] = ds[i].SetReceipt(Receipt{Exchange: s.cfg.Exchange, RoutingKey: keys[i]})
		case <-ctx.Done():
			errs[i] = s.wrap(fmt.Errorf("no confirm from the broker: %w", ctx.Err()))
		}
	}
}

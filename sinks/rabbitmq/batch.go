package rabbitmq

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks"
)

var _ sink.BatchSink = (*Sink)(nil)

// DeliverBatch publishes ds back to back on the sink's channel and then
// waits for their confirms, which the broker sends as they come (often one
// basic.ack for many), instead of one round trip each (see
// [sink.BatchSink]). Each message is what
// Deliver would publish. At most max_in_flight publishes are outstanding
// at once.
func (s *Sink) DeliverBatch(ctx context.Context, ds []*sink.Delivery) []error {
	return sinks.Pipeline[*publisher]{
		Link: s.link, Timeout: s.cfg.Timeout, Chunk: s.cfg.MaxInFlight, Wrap: s.wrap, Start: s.startPublish,
	}.DeliverBatch(ctx, ds)
}

// startPublish sends d without waiting for its confirm.
func (s *Sink) startPublish(ctx context.Context, p *publisher, d *sink.Delivery) (func() error, error) {
	key, err := s.cfg.routingKey.Render(s.name, d)
	if err != nil {
		return nil, s.wrap(sink.Permanent(err))
	}
	msg := s.message(ctx, d)
	pp := &pendingPublish{messageID: msg.MessageId, done: make(chan error, 1)}
	if _, err := p.send(ctx, s.cfg.Exchange, key, msg, pp); err != nil {
		return nil, s.wrap(classify(err))
	}
	return func() error {
		select {
		case err := <-pp.done:
			if err != nil {
				return s.wrap(classify(err))
			}
			return d.SetReceipt(Receipt{Exchange: s.cfg.Exchange, RoutingKey: key})
		case <-ctx.Done():
			return s.wrap(fmt.Errorf("no confirm from the broker: %w", ctx.Err()))
		}
	}, nil
}

package nats

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks"
)

var _ sink.BatchSink = (*Sink)(nil)

// DeliverBatch publishes ds asynchronously, so their acknowledgements
// travel together instead of one round trip each, and then waits for
// every one (see [sink.BatchSink]).
// Each message is what Deliver would publish, under the same Nats-Msg-Id.
// At most max_in_flight publishes are outstanding at once.
func (s *Sink) DeliverBatch(ctx context.Context, ds []*sink.Delivery) []error {
	return sinks.Pipeline[*conn]{
		Link: s.link, Timeout: s.cfg.Timeout, Chunk: s.cfg.MaxInFlight, Wrap: s.wrap, Start: s.startPublish,
	}.DeliverBatch(ctx, ds)
}

// startPublish sends d without waiting for its acknowledgement.
func (s *Sink) startPublish(ctx context.Context, c *conn, d *sink.Delivery) (func() error, error) {
	msg, err := s.message(ctx, d)
	if err != nil {
		return nil, s.wrap(sink.Permanent(err))
	}
	f, err := c.js.PublishMsgAsync(msg, s.publishOptions(d)...)
	if err != nil {
		return nil, s.wrap(s.classify(ctx, c, msg.Subject, err))
	}
	return func() error {
		select {
		case ack := <-f.Ok():
			return d.SetReceipt(Receipt{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate})
		case err := <-f.Err():
			return s.wrap(s.classify(ctx, c, msg.Subject, err))
		case <-ctx.Done():
			return s.wrap(fmt.Errorf("no acknowledgement: %w", ctx.Err()))
		}
	}, nil
}

package sinks

import (
	"context"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// Pipeline is how a broker sink publishes one delivery of a batch without
// waiting: Start sends it on the connection and returns how to await its
// acknowledgement (nil with an error when it could not be sent). Both
// return errors already classified and wrapped by the sink.
type Pipeline[C Conn] struct {
	Link    *Link[C]
	Timeout time.Duration // bounds each chunk's wait for its acknowledgements
	Chunk   int           // deliveries outstanding at once: the sink's max_in_flight
	Wrap    func(error) error
	Start   func(ctx context.Context, c C, d *sink.Delivery) (wait func() error, err error)
}

// DeliverBatch implements [sink.BatchSink.DeliverBatch] with p: chunk by chunk,
// it takes publish slots and the connection, starts every delivery of the
// chunk, then awaits each acknowledgement.
func (p Pipeline[C]) DeliverBatch(ctx context.Context, ds []*sink.Delivery) []error {
	errs := make([]error, len(ds))
	for start := 0; start < len(ds); start += p.Chunk {
		end := min(start+p.Chunk, len(ds))
		p.deliverChunk(ctx, ds[start:end], errs[start:end])
	}
	return errs
}

func (p Pipeline[C]) deliverChunk(ctx context.Context, ds []*sink.Delivery, errs []error) {
	c, release, err := p.Link.Acquire(ctx, len(ds))
	if err != nil {
		for i := range errs {
			errs[i] = p.Wrap(err)
		}
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	waits := make([]func() error, len(ds))
	for i, d := range ds {
		waits[i], errs[i] = p.Start(ctx, c, d)
	}
	for i, wait := range waits {
		if wait != nil {
			errs[i] = wait()
		}
	}
}

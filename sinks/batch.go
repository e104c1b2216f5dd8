package sinks

import (
	"context"

	"github.com/outboxd/outboxd/core"
)

// BatchSink is a prototype of an optional extension of [core.Sink], for
// sinks that can hand many messages to their destination per round trip
// (asynchronous publishes whose acknowledgements are awaited together).
// The relay does not call it yet: the broker sinks implement it so the
// benchmark in bench/ can measure what a batch path in the relay would
// gain (see docs/brokers.md).
//
// DeliverBatch delivers ds and returns one outcome per delivery, in the
// same order, classified as Deliver's are (nil, retryable, core.Permanent,
// core.RetryAfter); receipts are set on the deliveries that succeeded.
type BatchSink interface {
	core.Sink
	DeliverBatch(ctx context.Context, ds []*core.Delivery) []error
}

// FailAll returns an outcome list of len(ds) holding err for each.
func FailAll(ds []*core.Delivery, err error) []error {
	errs := make([]error, len(ds))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// DeliverInChunks splits ds into chunks of at most size deliveries (a
// sink's bound on outstanding publishes) and hands each, with its part of
// the outcome list, to deliver; it returns the whole outcome list.
func DeliverInChunks(ds []*core.Delivery, size int, deliver func(ds []*core.Delivery, errs []error)) []error {
	errs := make([]error, len(ds))
	for start := 0; start < len(ds); start += size {
		end := min(start+size, len(ds))
		deliver(ds[start:end], errs[start:end])
	}
	return errs
}

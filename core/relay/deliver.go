package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// deliveryShareOfLease is the part of the lease a delivery may use; the rest
// is left for the terminal write, so a slow sink cannot make a healthy relay
// look dead.
const deliveryShareOfLease = 0.8

// setMaxAttempts fills in the attempt after which the row is
// dead-lettered: its own max_attempts, else its sink's.
func (row *claimedRow) setMaxAttempts(sc SinkConfig) {
	row.MaxAttempts = sc.MaxAttempts
	if row.rowMax != nil {
		row.MaxAttempts = int(*row.rowMax)
	}
}

// budget is how long a delivery of row may take from now: up to
// deliveryShareOfLease of its lease.
func (r *Relay) budget(row *claimedRow) time.Duration {
	return time.Until(row.leaseUntil.Add(-r.leaseReserve()))
}

// leaseReserve is the part of a lease left for the terminal write after
// the delivery's deadline.
func (r *Relay) leaseReserve() time.Duration {
	return time.Duration(float64(r.cfg.Lease) * (1 - deliveryShareOfLease))
}

// callSink calls the sink, turning a panic into a retryable error so one bad
// payload or buggy sink cannot take the relay down.
func callSink(ctx context.Context, s sink.Sink, d *sink.Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
	}()
	return s.Deliver(ctx, d)
}

// callBatchSink calls a BatchSink, turning a panic, or an answer with the
// wrong number of outcomes, into a retryable error for every delivery.
func callBatchSink(ctx context.Context, s sink.BatchSink, ds []*sink.Delivery) (errs []error) {
	defer func() {
		var err error
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		} else if len(errs) != len(ds) {
			err = fmt.Errorf("sink returned %d outcomes for a batch of %d", len(errs), len(ds))
		}
		if err != nil {
			errs = make([]error, len(ds))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return s.DeliverBatch(ctx, ds)
}

func (r *Relay) waitForPermit(ctx context.Context, wait time.Duration) bool {
	_, span := r.tracer.Start(ctx, "outbox rate_limit wait")
	defer span.End()
	span.SetAttributes(attrWaitSeconds.Float64(wait.Seconds()))
	return sleep(ctx, wait)
}

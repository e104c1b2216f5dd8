package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// deliveryShareOfLease is the part of the lease a delivery may use; the rest
// is left for the terminal write, so a slow sink cannot make a healthy relay
// look dead.
const deliveryShareOfLease = 0.8

// deliver runs one attempt and queues its outcome. freeSlot gives the row's
// slot back when the delivery deadline passes while the sink is still
// running: a sink that ignores its context must not keep the slot and,
// slot by slot, stall every sink of its claim loop. Its late result is still
// written (as a zombie if the row was re-claimed meanwhile).
func (r *Relay) deliver(ctx context.Context, row claimedRow, wait time.Duration, freeSlot func()) {
	sink, known := r.sinks[row.Sink]
	if !known {
		// The claim only takes rows of configured sinks; should one slip
		// through, it waits for a relay that has its sink.
		r.release(row, r.cfg.PollInterval, fmt.Errorf("sink %q is not configured on this relay", row.Sink))
		return
	}
	row.MaxAttempts = sink.MaxAttempts
	if row.rowMax != nil {
		row.MaxAttempts = int(*row.rowMax)
	}
	if row.Attempt > row.MaxAttempts {
		// Every attempt so far was abandoned by a relay that died mid-delivery
		// (attempts count at claim time): this message crash-loops its relays.
		r.finish(ctx, row, sink, nil, 0, Permanent(fmt.Errorf(
			"attempts exhausted: attempt %d of %d was abandoned without a result (its relay died or overran the lease)",
			row.Attempt-1, row.MaxAttempts)))
		return
	}
	ctx = traceContext.Extract(ctx, mapCarrier(row.Headers))
	ctx, span := r.startDeliverySpan(ctx, row, sink)
	if wait > 0 && !r.waitForPermit(ctx, wait) {
		r.release(row, 0, errors.New("relay shutting down before the rate-limit permit came due"))
		endSpan(span, outcomeRetry, nil)
		return
	}
	if paused := r.limiter.PausedFor(row.Sink); paused > 0 {
		r.release(row, paused, fmt.Errorf("sink %q is paused by a Retry-After", row.Sink))
		endSpan(span, outcomeRateLimited, nil)
		return
	}
	budget := time.Until(row.leaseUntil.Add(-time.Duration(float64(r.cfg.Lease) * (1 - deliveryShareOfLease))))
	if budget <= 0 {
		r.release(row, 0, errors.New("lease too close to expiry to start the delivery"))
		endSpan(span, outcomeRetry, nil)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, budget)
	stopFreeing := context.AfterFunc(dctx, freeSlot)
	started := time.Now()
	inFlightAttrs := r.labels[sink.Name].inFlight
	r.metrics.inFlight.Add(ctx, 1, inFlightAttrs)
	err := callSink(dctx, sink.Sink, &row.Delivery)
	r.metrics.inFlight.Add(ctx, -1, inFlightAttrs)
	stopFreeing()
	cancel()
	r.finish(ctx, row, sink, span, time.Since(started), err)
}

// callSink calls the sink, turning a panic into a retryable error so one bad
// payload or buggy sink cannot take the relay down.
func callSink(ctx context.Context, s Sink, d *Delivery) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
	}()
	return s.Deliver(ctx, d)
}

func (r *Relay) waitForPermit(ctx context.Context, wait time.Duration) bool {
	_, span := r.tracer.Start(ctx, "outbox rate_limit wait")
	defer span.End()
	span.SetAttributes(attrWaitSeconds.Float64(wait.Seconds()))
	return sleep(ctx, wait)
}

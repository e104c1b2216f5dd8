package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/sink"
)

// deliveryShareOfLease is the part of the lease a delivery may use; the rest
// is left for the terminal write, so a slow sink cannot make a healthy relay
// look dead.
const deliveryShareOfLease = 0.8

// deliver runs one attempt and queues its outcome. freeSlot gives the row's
// slot back when the delivery deadline passes while the sink is still
// running: a sink that ignores its context must not keep the slot and,
// slot by slot, stall every sink of its claim loop. Its late result is still
// written (as a zombie if the row was re-claimed meanwhile). deliver
// reports whether freeSlot may have been called.
func (r *Relay) deliver(ctx context.Context, row *claimedRow, wait time.Duration, freeSlot func()) bool {
	sc, dctx, span, ok := r.begin(ctx, row, wait)
	if !ok {
		return false
	}
	stopFreeing := context.AfterFunc(dctx, freeSlot)
	row.Delivery = *row.WithContext(dctx)
	started := time.Now()
	inFlightAttrs := r.labels[sc.Name].inFlight
	r.metrics.inFlight.Add(ctx, 1, inFlightAttrs...)
	err := callSink(dctx, sc.Sink, &row.Delivery)
	r.metrics.inFlight.Add(ctx, -1, inFlightAttrs...)
	freed := !stopFreeing()
	r.finish(ctx, row, sc, span, time.Since(started), err)
	return freed
}

// deliverBatch runs one attempt of each row, all of one BatchSink, in one
// DeliverBatch call, and queues each outcome; freeSlots gives the rows'
// slots back, early when the batch overruns its deadline (see deliver).
func (r *Relay) deliverBatch(ctx context.Context, rows []*claimedRow, freeSlots func()) {
	var (
		batch  []*claimedRow
		spans  []trace.Span
		sc     SinkConfig
		budget time.Duration
	)
	for _, row := range rows {
		s, dctx, span, ok := r.begin(ctx, row, 0)
		if !ok {
			continue
		}
		sc = s
		budget = r.budget(row) // the rows share one claim, hence one lease
		row.Delivery = *row.WithContext(dctx)
		batch, spans = append(batch, row), append(spans, span)
	}
	if len(batch) == 0 {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	stopFreeing := context.AfterFunc(bctx, freeSlots)
	defer stopFreeing()
	ds := make([]*sink.Delivery, len(batch))
	for i := range batch {
		// Each delivery's context keeps its span and takes the batch's
		// deadline.
		batch[i].Delivery = *batch[i].WithContext(trace.ContextWithSpan(bctx, spans[i]))
		ds[i] = &batch[i].Delivery
	}
	started := time.Now()
	inFlightAttrs := r.labels[sc.Name].inFlight
	r.metrics.inFlight.Add(ctx, int64(len(ds)), inFlightAttrs...)
	errs := callBatchSink(bctx, sc.Sink.(sink.BatchSink), ds)
	r.metrics.inFlight.Add(ctx, -int64(len(ds)), inFlightAttrs...)
	elapsed := time.Since(started)
	for i, row := range batch {
		r.finish(ctx, row, sc, spans[i], elapsed, errs[i])
	}
}

// begin prepares the delivery of row: its sink and max attempts, the trace
// span continuing the producer's trace, the rate-limit permit's wait, and
// the context of the attempt, with the claim's delivery deadline. It
// reports false when the row was finished or handed back instead: its sink
// is not configured here, its columns do not decode, it has used its attempts, its sink is paused, the
// relay is shutting down or its lease is too close to expiry.
func (r *Relay) begin(ctx context.Context, row *claimedRow, wait time.Duration) (SinkConfig, context.Context, trace.Span, bool) {
	sc, known := r.sinks[row.Sink]
	if !known {
		// The claim only takes rows of configured sinks; should one slip
		// through, it waits for a relay that has its sink.
		r.release(row, r.cfg.PollInterval, fmt.Errorf("sink %q is not configured on this relay", row.Sink))
		return sc, nil, nil, false
	}
	if r.refuse(ctx, row, sc) {
		return sc, nil, nil, false
	}
	ctx = propagation.TraceContext{}.Extract(row.deadline.context(ctx), propagation.MapCarrier(row.Headers))
	ctx, span := r.startDeliverySpan(ctx, row, sc, r.labels[sc.Name])
	handBack := func(delay time.Duration, outcome string, cause error) (SinkConfig, context.Context, trace.Span, bool) {
		r.release(row, delay, cause)
		endSpan(span, outcome, nil)
		return sc, nil, nil, false
	}
	if wait > 0 && !r.waitForPermit(ctx, wait) {
		return handBack(0, outcomeRetry, errors.New("relay shutting down before the rate-limit permit came due"))
	}
	// Checked after the permit's wait: a pause may have come meanwhile.
	if r.limiter.PausedFor(row.Sink) > 0 {
		// Back to pending at once: no relay claims it while the database
		// says the sink is paused, and a resume makes it claimable again
		// without waiting for the pause's planned end.
		return handBack(0, outcomeRateLimited, fmt.Errorf("sink %q is paused (by a Retry-After or by hand)", row.Sink))
	}
	if r.budget(row) <= 0 {
		return handBack(0, outcomeRetry, errors.New("lease too close to expiry to start the delivery"))
	}
	if next, held := r.heldByBreaker(row); held {
		r.holdForProbe(row, span, time.Until(next), errOpenBeforeStart)
		return sc, nil, nil, false
	}
	if err := r.prepare(ctx, row); err != nil {
		r.finish(ctx, row, sc, span, 0, err)
		return sc, nil, nil, false
	}
	return sc, ctx, span, true
}

// refuse sets row's max attempts and dead-letters it, reporting true,
// when it cannot be delivered at all: its columns do not decode, or it has
// used its attempts.
func (r *Relay) refuse(ctx context.Context, row *claimedRow, sc SinkConfig) bool {
	row.setMaxAttempts(sc)
	if row.undecodable != nil {
		r.finish(ctx, row, sc, nil, 0, sink.Permanent(row.undecodable))
		return true
	}
	if row.Attempt > row.MaxAttempts {
		// Every attempt so far was abandoned by a relay that died mid-delivery
		// (attempts count at claim time): this message crash-loops its relays.
		r.finish(ctx, row, sc, nil, 0, sink.Permanent(fmt.Errorf(
			"attempts exhausted: attempt %d of %d was abandoned without a result (its relay died or overran the lease)",
			row.Attempt-1, row.MaxAttempts)))
		return true
	}
	return false
}

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

package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/failurelog"
	"github.com/outboxd/outboxd/core/internal/slots"
	"github.com/outboxd/outboxd/core/sink"
)

// The delivery pipeline. A delivery is one request to a receiver: one row
// (deliver), a batch of rows in one sink.BatchSink call (deliverBatch),
// or a digest, one sink.DigestSink call for its members (digester.send
// and digester.finish, digest.go, which record the digest between steps 2
// and 4). A circuit breaker's probe is a delivery of its sink's shape whose
// row is marked probe (startProbe); a row of a sink limited per key is a
// row whose permit its key's reservation took. Whatever its shape, every
// delivery passes these steps, in this order, each written once in this
// file, so that a step added for deliveries applies to all of them:
//
//  1. accept: a row that cannot be delivered at all (its sink is not
//     configured here, its columns do not decode, it has used its
//     attempts) is handed back, or dead-lettered unsent;
//  2. admit: the rate-limit permit (reserved by the claim loop, else taken
//     here: a probe's), then the sink's pause, the lease left and the
//     receiver's breaker; a delivery not admitted is handed back whole,
//     its attempts refunded;
//  3. stage: the Stage prepares each row (stage.go; done already for rows
//     whose loop staged them to name their rate key or digest key);
//  4. deliver: the sink is called once, within the lease;
//  5. feedback: the outcome counts, once per delivery, toward the
//     receiver's breaker, which may hold the rows for its next probe
//     (breaker.go), and a Retry-After pauses the receiver (the limiter);
//  6. write: each row's next state (sent; put off within its deferral
//     budget; failed after its backoff; dead, or handed to its fallback)
//     and its terminal write, a digest's members in one statement.
//
// A row refused before it is sent (steps 1 and 3) skips step 5: it says
// nothing about the receiver, so it neither opens nor closes a breaker,
// even as a probe.

// permit is the rate-limit permit a delivery starts with: one its claim
// loop reserved, due after wait, or none yet (the zero permit), which
// admit then takes if the sink is limited.
type permit struct {
	wait  time.Duration
	taken bool
}

// permitAfter is a permit reserved by a claim loop, due after wait.
func permitAfter(wait time.Duration) permit { return permit{wait: wait, taken: true} }

// start delivers row in its own goroutine with permit p; done frees the
// row's slot (once, possibly early: see deliver).
func (r *Relay) start(ctx context.Context, row *claimedRow, p permit, done func()) {
	r.deliveries.Add(1)
	free := sync.OnceFunc(done)
	go func() {
		defer r.deliveries.Done()
		defer free()
		r.deliver(ctx, row, p, free)
	}()
}

// startProbe delivers row, claimed as the probe of its sink's open
// breaker, in its sink's shape: a digesting sink's as a digest with the
// row's other members, any other's as a row. Its loop reserved no permit
// for it: admit takes one.
func (r *Relay) startProbe(ctx, deliverCtx context.Context, row *claimedRow) {
	row.probe = true
	sc := r.sinks[row.Sink]
	if !sc.digests() {
		r.start(deliverCtx, row, permit{}, func() {})
		return
	}
	d, err := r.newDigester(sc)
	if err != nil {
		r.release(row, 0, err)
		return
	}
	d.dispatch(ctx, deliverCtx, []*claimedRow{row}, slots.New(1, 1))
}

// probePermitIn is how long the probe of sink name, limited as a whole,
// waits for its permit to come within the reservation horizon (0: it is
// within it), as far as this relay's reservations tell: a probe taken
// sooner would find none, and its breaker would stay probing until the
// probe's lease ended.
func (r *Relay) probePermitIn(name string) time.Duration {
	if rl := r.sinks[name].RateLimit; rl == nil || rl.PerKey {
		return 0
	}
	return max(0, r.limiter.NextPermitIn(name)-r.permitHorizon())
}

// deliver runs the pipeline for one row. freeSlot gives the row's slot
// back when the delivery deadline passes while the sink is still running:
// a sink that ignores its context must not keep the slot and, slot by
// slot, stall every sink of its claim loop. Its late result is still
// written (as a zombie if the row was re-claimed meanwhile). deliver
// reports whether freeSlot may have been called.
func (r *Relay) deliver(ctx context.Context, row *claimedRow, p permit, freeSlot func()) bool {
	sc, ok := r.accept(ctx, row)
	if !ok {
		return false
	}
	dctx, span := r.deliveryContext(ctx, row, sc)
	if !r.admit(dctx, sc, []*claimedRow{row}, []trace.Span{span}, p) {
		return false
	}
	if err := r.prepare(dctx, row); err != nil {
		r.finishUnsent(ctx, row, sc, span, err)
		return false
	}
	stopFreeing := context.AfterFunc(dctx, freeSlot)
	dctx = sink.WithAnswerSlot(dctx, &row.answer)
	row.Delivery = *row.WithContext(dctx)
	started := time.Now()
	row.started = started
	inFlightAttrs := r.labels[sc.Name].inFlight
	r.metrics.inFlight.Add(ctx, 1, inFlightAttrs...)
	err := callSink(dctx, sc.Sink, &row.Delivery)
	r.metrics.inFlight.Add(ctx, -1, inFlightAttrs...)
	freed := !stopFreeing()
	r.finish(ctx, row, sc, span, time.Since(started), err)
	return freed
}

// deliverBatch runs the pipeline for rows, all of one BatchSink and one
// claim, in one DeliverBatch call; each row's outcome is its own.
// freeSlots gives the rows' slots back, early when the batch overruns its
// deadline (see deliver).
func (r *Relay) deliverBatch(ctx context.Context, rows []*claimedRow, freeSlots func()) {
	var (
		batch []*claimedRow
		spans []trace.Span
		sc    SinkConfig
	)
	for _, row := range rows {
		s, ok := r.accept(ctx, row)
		if !ok {
			continue
		}
		_, span := r.deliveryContext(ctx, row, s)
		sc, batch, spans = s, append(batch, row), append(spans, span)
	}
	if len(batch) == 0 || !r.admit(ctx, sc, batch, spans, permit{}) {
		return
	}
	bctx, cancel := context.WithTimeout(ctx, r.budgetOf(batch))
	defer cancel()
	staged, stagedSpans := make([]*claimedRow, 0, len(batch)), make([]trace.Span, 0, len(batch))
	for i, row := range batch {
		// Each delivery's context keeps its span and takes the batch's
		// deadline.
		row.Delivery = *row.WithContext(sink.WithAnswerSlot(trace.ContextWithSpan(bctx, spans[i]), &row.answer))
		if err := r.prepare(row.Context(), row); err != nil {
			r.finishUnsent(ctx, row, sc, spans[i], err)
			continue
		}
		staged, stagedSpans = append(staged, row), append(stagedSpans, spans[i])
	}
	if len(staged) == 0 {
		return
	}
	stopFreeing := context.AfterFunc(bctx, freeSlots)
	defer stopFreeing()
	ds := make([]*sink.Delivery, len(staged))
	for i, row := range staged {
		ds[i] = &row.Delivery
	}
	started := time.Now()
	inFlightAttrs := r.labels[sc.Name].inFlight
	for _, row := range staged {
		row.started = started
	}
	r.metrics.inFlight.Add(ctx, int64(len(ds)), inFlightAttrs...)
	errs := callBatchSink(bctx, sc.Sink.(sink.BatchSink), ds)
	r.metrics.inFlight.Add(ctx, -int64(len(ds)), inFlightAttrs...)
	elapsed := time.Since(started)
	for i, row := range staged {
		r.finish(ctx, row, sc, stagedSpans[i], elapsed, errs[i])
	}
}

// Step 1.

// accept returns row's sink, or false when row was handed back (its sink
// is not configured here: the claim only takes rows of configured sinks,
// and should one slip through it waits for a relay that has its sink) or
// dead-lettered unsent (see refuse).
func (r *Relay) accept(ctx context.Context, row *claimedRow) (SinkConfig, bool) {
	sc, known := r.sinks[row.Sink]
	if !known {
		r.release(row, r.cfg.PollInterval, fmt.Errorf("sink %q is not configured on this relay", row.Sink))
		return sc, false
	}
	return sc, !r.refuse(ctx, row, sc)
}

// refuse sets row's max attempts and dead-letters it unsent, reporting
// true, when it cannot be delivered at all: its columns do not decode, or
// it has used its attempts.
func (r *Relay) refuse(ctx context.Context, row *claimedRow, sc SinkConfig) bool {
	row.setMaxAttempts(sc)
	if row.undecodable != nil {
		r.finishUnsent(ctx, row, sc, nil, sink.Permanent(row.undecodable))
		return true
	}
	if row.Attempt > row.MaxAttempts {
		// Every attempt so far was abandoned by a relay that died mid-delivery
		// (attempts count at claim time): this message crash-loops its relays.
		r.finishUnsent(ctx, row, sc, nil, sink.Permanent(fmt.Errorf(
			"attempts exhausted: attempt %d of %d was abandoned without a result (its relay died or overran the lease)",
			row.Attempt-1, row.MaxAttempts)))
		return true
	}
	return false
}

// deliveryContext is the context of row's delivery: the claim's deadline,
// and the producer's trace continued by the delivery's span.
func (r *Relay) deliveryContext(ctx context.Context, row *claimedRow, sc SinkConfig) (context.Context, trace.Span) {
	ctx = propagation.TraceContext{}.Extract(row.deadline.context(ctx), propagation.MapCarrier(row.Headers))
	return r.startDeliverySpan(ctx, row, sc, r.labels[sc.Name])
}

// Step 2.

// admit lets the delivery of rows (one row, a batch's rows or a digest's
// members: one sink, one claim, one rate key) start, reporting true, or
// hands every row back, attempts refunded, ending its span (spans may be
// shorter than rows, or nil): when the permit cannot be taken or waited
// for, the sink is paused (a pause may have come during the permit's
// wait), the lease is too close to its end, or the receiver's breaker
// opened after the rows were claimed (they then wait for its next probe).
func (r *Relay) admit(ctx context.Context, sc SinkConfig, rows []*claimedRow, spans []trace.Span, p permit) bool {
	handBack := func(delay time.Duration, outcome string, cause error) bool {
		for i, row := range rows {
			r.release(row, delay, cause)
			endSpan(spanOf(spans, i), outcome, nil)
		}
		return false
	}
	if !p.taken {
		var due time.Duration
		var err error
		if p, due, err = r.takePermit(ctx, sc, rows[0]); err != nil {
			return handBack(due, outcomeRateLimited, err)
		}
	}
	if p.wait > 0 && !r.waitForPermit(ctx, p.wait) {
		return handBack(0, outcomeRetry, errors.New("relay shutting down before the rate-limit permit came due"))
	}
	if r.limiter.PausedFor(sc.Name) > 0 {
		// Back to pending at once: no relay claims it while the database
		// says the sink is paused, and a resume makes it claimable again
		// without waiting for the pause's planned end.
		return handBack(0, outcomeRateLimited, fmt.Errorf("sink %q is paused (by a Retry-After or by hand)", sc.Name))
	}
	if due, err := r.keyPaused(sc, rows[0].rateKey); err != nil {
		return handBack(due, outcomeRateLimited, err)
	}
	if r.budgetOf(rows) <= 0 {
		return handBack(0, outcomeRetry, errors.New("lease too close to expiry to start the delivery"))
	}
	if next, held := r.heldByBreaker(lead(rows)); held {
		r.holdAll(rows, spans, time.Until(next), errOpenBeforeStart)
		return false
	}
	return true
}

// takePermit takes the permit of a delivery its claim loop reserved none
// for (a probe), by the one reservation rule (permits.go): one of the
// sink's, or of the row's rate key's for a sink limited per key; a sink
// without a limit needs none. Without one it says why, and when the rows
// should come back.
func (r *Relay) takePermit(ctx context.Context, sc SinkConfig, row *claimedRow) (permit, time.Duration, error) {
	if sc.RateLimit == nil {
		return permitAfter(0), 0, nil
	}
	var a admission
	if sc.RateLimit.PerKey {
		a = r.admitByKey(ctx, sc, []string{row.rateKey}, noKeyRoom{})
	} else {
		a = r.admitSink(ctx, sc, 1)
	}
	if a.wait[0] < 0 {
		return permit{}, a.due[0], a.cause[0]
	}
	return permitAfter(a.wait[0]), 0, nil
}

// Step 5.

// finish is steps 5 and 6 for a row the sink was called for, alone or in
// a batch: its outcome goes to the failure log (see package failurelog),
// then to feedback, then the row's next state is written.
func (r *Relay) finish(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) {
	r.failures.Attempted(receiverOf(row), row.ID, err)
	if hold, held := r.feedback(ctx, sc, row, err); held {
		r.holdForProbe(row, span, hold, err)
		return
	}
	r.write(ctx, row, sc, span, elapsed, err)
}

// finishUnsent is step 6 for a row refused before it was sent (steps 1
// and 3): the failure log has it, feedback does not.
func (r *Relay) finishUnsent(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, err error) {
	r.failures.Attempted(receiverOf(row), row.ID, err)
	r.write(ctx, row, sc, span, 0, err)
}

// feedback is step 5 for the outcome err of one delivery to sc, whose
// rows share lead's receiver (lead is its probe row, if any): err counts
// once toward the receiver's breaker (settleBreaker), which reports
// whether it holds the delivery's rows for its next probe, and how long;
// unless it does, a Retry-After pauses the receiver cluster-wide
// (pauseFor). Each row's own outcome is step 6's.
func (r *Relay) feedback(ctx context.Context, sc SinkConfig, lead *claimedRow, err error) (time.Duration, bool) {
	if hold, held := r.settleBreaker(ctx, lead, err); held {
		return hold, true
	}
	if d, ok := sink.RetryAfterDelay(err); ok {
		r.pauseFor(ctx, lead, sc, d)
	}
	return 0, false
}

// holdAll hands rows back for their receiver's next probe, due after
// delay (see holdForProbe), ending their spans.
func (r *Relay) holdAll(rows []*claimedRow, spans []trace.Span, delay time.Duration, cause error) {
	for i, row := range rows {
		r.holdForProbe(row, spanOf(spans, i), delay, cause)
	}
}

// Step 6.

// write classifies row's outcome err (see outcome) and queues its
// terminal write, unless a dead row went to its fallback instead.
func (r *Relay) write(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) {
	if o, ok := r.conclude(ctx, row, sc, span, elapsed, err); ok {
		r.submit(row, o)
	}
}

// conclude is the terminal write err makes of row's attempt (see
// outcome), or false when the row, dead, was handed over to its route
// target's fallback_after: dead fallback instead (written by then).
func (r *Relay) conclude(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) (completer.Outcome, bool) {
	o := r.settle(ctx, row, sc, span, elapsed, err)
	return o, !r.fellBack(ctx, row)
}

// settle is the terminal write err makes of row's attempt (see outcome),
// a last attempt an outage spares included (spareLastAttempt).
func (r *Relay) settle(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) completer.Outcome {
	o := r.outcome(ctx, row, sc, span, elapsed, err)
	r.spareLastAttempt(row, sc, err, &o)
	return o
}

// fellBack reports whether row, settled dead, was handed over to its
// route target's fallback_after: dead fallback instead (written by then).
func (r *Relay) fellBack(ctx context.Context, row *claimedRow) bool {
	return row.report.label == outcomeDead && r.fallBackOnDead(ctx, row)
}

// lead is the row that speaks for a delivery of rows toward their
// receiver's breaker: its probe row, if it has one.
func lead(rows []*claimedRow) *claimedRow {
	for _, row := range rows {
		if row.probe {
			return row
		}
	}
	return rows[0]
}

// budgetOf is how long the delivery of rows may take from now: the
// shortest budget of theirs (see budget).
func (r *Relay) budgetOf(rows []*claimedRow) time.Duration {
	b := r.budget(rows[0])
	for _, row := range rows[1:] {
		b = min(b, r.budget(row))
	}
	return b
}

// receiverOf is row's receiver as the failure log counts it.
func receiverOf(row *claimedRow) failurelog.Receiver {
	return failurelog.Receiver{Sink: row.Sink, Key: row.rateKey}
}

// spanOf is spans[i], or nil when spans has none there.
func spanOf(spans []trace.Span, i int) trace.Span {
	if i < len(spans) {
		return spans[i]
	}
	return nil
}

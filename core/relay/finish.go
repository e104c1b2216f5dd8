package relay

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/maintenance"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/relaysignal"
	"github.com/outboxd/outboxd/internal/safetext"
)

// outcome is the terminal write err makes of row's attempt, step 6 of
// the pipeline (pipeline.go):
//   - nil: sent;
//   - RetryAfter(d): back to pending without spending the attempt, after d
//     but no sooner than the sink's backoff (see deferral; feedback has
//     paused the receiver for d); once the row has been put off
//     MaxDeferrals times, dead instead;
//   - Permanent, or any error on the last attempt: dead, logged at ERROR;
//   - any other error: failed, retried after the sink's backoff.
//
// Its report, made once it is written, lives in the row.
func (r *Relay) outcome(ctx context.Context, row *claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) completer.Outcome {
	o := completer.Outcome{ID: row.ID, Token: row.token, LeaseEnd: row.leaseUntil, Status: string(status.Sent),
		Receipt: safetext.Receipt(row.Receipt()), Attempt: r.attemptDetails(row, elapsed, err), Urgent: row.OrderingKey != ""}
	label := outcomeSent
	if err != nil {
		o.Err = r.storedError(err)
		if d, ok := sink.RetryAfterDelay(err); ok {
			if row.deferrals >= sc.MaxDeferrals {
				o.Status, label = string(status.Dead), outcomeDead
				o.Err = r.storedError(sink.Permanent(fmt.Errorf(
					"deferral budget spent: put off %d times by Retry-After answers (max_deferrals %d); last answer: %w",
					row.deferrals, sc.MaxDeferrals, err)))
			} else {
				o.Status, o.Delay, o.Refund, o.Deferred, label = string(status.Pending), sc.deferral(row, d), 1, 1, outcomeRateLimited
			}
		} else if sink.IsPermanent(err) || row.Attempt >= row.MaxAttempts {
			o.Status, label = string(status.Dead), outcomeDead
		} else {
			o.Status, o.Delay, label = string(status.Failed), sc.Backoff.delay(row.Attempt), outcomeRetry
		}
	}
	// The report lives in the row, which nothing else uses once its
	// outcome is submitted: no allocation per delivery.
	row.report = deliveryReport{relay: r, ctx: ctx, row: row, labels: r.labels[sc.Name], span: span,
		elapsed: elapsed, stored: o.Err, status: o.Status, label: label,
		destination: row.Headers[maintenance.DestinationHeader]}
	o.Done = &row.report
	return o
}

// submit queues o, the outcome of row's attempt, for writing: the attempt
// is over. Every claimed row ends here exactly once, by finish or release.
// The row's payload is let go here: the rows of a claim live in one array
// until the last of them is written, and large payloads held that long
// doubled a relay's heap (test/faults TestLargePayloadsBoundedMemory).
func (r *Relay) submit(row *claimedRow, o completer.Outcome) {
	row.end()
	r.completer.Submit(o)
}

// end lets go of row's payload and its part of the claim's shared
// deadline: its attempt is over (see submit; a digest ends its members
// so before writing their outcomes at once).
func (row *claimedRow) end() {
	row.Payload, row.Headers, row.ThreadRoot = nil, nil, nil
	row.deadline.done()
}

// deferral is how long a Retry-After of d puts row off: d, but no less
// than the sink's backoff for the attempt, grown by the row's earlier
// deferrals, so that a receiver answering "Retry-After: 0" (or a date in
// the past) is asked less and less often instead of as fast as the relay
// can go.
func (sc SinkConfig) deferral(row *claimedRow, d time.Duration) time.Duration {
	return max(d, sc.Backoff.delay(row.Attempt+row.deferrals))
}

// pauseFor pauses row's receiver for d after its Retry-After: the
// row's key for a per_key sink (its other keys keep flowing), else the
// whole sink; cluster-wide, written once per change (see ratelimit).
func (r *Relay) pauseFor(ctx context.Context, row *claimedRow, sc SinkConfig, d time.Duration) {
	if sc.RateLimit != nil && sc.RateLimit.PerKey && row.rateKey != "" {
		if err := r.limiter.PauseKey(ctx, row.Sink, row.rateKey, d); err != nil {
			r.logger.Warn("outbox: could not pause a rate key cluster-wide", "sink", row.Sink, "key", row.rateKey, "error", err)
		}
		return
	}
	if err := r.limiter.Pause(ctx, row.Sink, d, r.q.Channel); err != nil {
		r.logger.Warn("outbox: could not pause sink cluster-wide", "sink", row.Sink, "error", err)
	}
}

// release hands a claimed row back without spending its attempt, to be
// claimed again after delay.
func (r *Relay) release(row *claimedRow, delay time.Duration, cause error) {
	r.submit(row, r.releaseOutcome(row, delay, cause))
}

// releaseOutcome is the terminal write that hands row back (see release).
func (r *Relay) releaseOutcome(row *claimedRow, delay time.Duration, cause error) completer.Outcome {
	return completer.Outcome{ID: row.ID, Token: row.token, Status: string(status.Pending), Delay: delay,
		Err: r.storedError(cause), Refund: 1, LeaseEnd: row.leaseUntil, Urgent: row.OrderingKey != "",
		Done: completer.ReportFunc(func(ok bool) {
			r.signals.EmitWritten(relaysignal.Outcome{ID: row.ID, Sink: row.Sink, Status: string(status.Pending), Written: ok})
		})}
}

// storedError is err's text as the row stores it, as the dead-letter log
// prints it and as the delivery's span records it: whatever a sink or a
// receiver put into it, with Config.Redact's secrets removed, made safe
// for PostgreSQL and for terminals, once, here (see safetext).
func (r *Relay) storedError(err error) *string {
	text := err.Error()
	if r.cfg.Redact != nil {
		text = r.cfg.Redact(text)
	}
	msg := safetext.Text(text, safetext.MaxErrorBytes)
	return &msg
}

// deliveryReport records a delivery's metrics, span and dead-letter log
// once its outcome is written (or found to be a zombie's).
type deliveryReport struct {
	relay   *Relay
	ctx     context.Context
	row     *claimedRow
	labels  *sinkLabels
	span    trace.Span
	elapsed time.Duration
	stored  *string // the error as stored, nil for none
	status  string
	label   string
	// destination is the tenant's destination the row was for ("" for
	// none), taken before submit lets go of the row's headers: its
	// delivery is counted for it too.
	destination string
}

// Written is called by the completer once the outcome is written.
func (d *deliveryReport) Written(ok bool) {
	r, row := d.relay, d.row
	if !ok {
		d.label = outcomeZombie
	} else if d.status == string(status.Dead) {
		r.logger.Error("outbox: message dead-lettered",
			"id", row.ID, "sink", row.Sink, "dedup_key", row.DedupKey,
			"attempts", row.Attempt, "last_error", *d.stored)
	}
	r.metrics.recordDelivery(d.ctx, row.CreatedAt, d.labels, d.label, d.elapsed)
	if ok {
		r.minutes.Record(row.Sink, d.destination, status.Row(d.status), d.elapsed)
	}
	endSpan(d.span, d.label, d.stored)
	r.signals.EmitWritten(relaysignal.Outcome{ID: row.ID, Sink: row.Sink, Status: d.status, Written: ok})
}

package core

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// finish turns a delivery's error into the row's next state and queues the
// terminal write:
//   - nil: sent;
//   - RetryAfter(d): back to pending after d without spending the attempt,
//     and the sink pauses cluster-wide until then;
//   - Permanent, or any error on the last attempt: dead, logged at ERROR;
//   - any other error: failed, retried after the sink's backoff.
func (r *Relay) finish(ctx context.Context, row claimedRow, sink SinkConfig, span trace.Span, elapsed time.Duration, err error) {
	o := outcome{id: row.ID, token: row.token, leaseEnd: row.leaseUntil, status: StatusSent, receipt: row.Receipt(),
		urgent: row.OrderingKey != ""}
	label := outcomeSent
	if err != nil {
		msg := err.Error()
		o.err = &msg
		if d, ok := RetryAfterDelay(err); ok {
			o.status, o.delay, o.refund, label = StatusPending, d, 1, outcomeRateLimited
			if perr := r.limiter.pause(ctx, row.Sink, d, r.ob.channel); perr != nil {
				r.logger.Warn("outbox: could not pause sink cluster-wide", "sink", row.Sink, "error", perr)
			}
		} else if IsPermanent(err) || row.Attempt >= row.MaxAttempts {
			o.status, label = StatusDead, outcomeDead
		} else {
			o.status, o.delay, label = StatusFailed, sink.Backoff.delay(row.Attempt), outcomeRetry
		}
	}
	// The report copies the few fields it needs: a closure over row and
	// sink would move both (hundreds of bytes) to the heap per delivery.
	rep := &deliveryReport{relay: r, ctx: ctx, id: row.ID, sink: row.Sink, dedupKey: row.DedupKey,
		attempt: row.Attempt, createdAt: row.CreatedAt, labels: r.labels[sink.Name], span: span,
		elapsed: elapsed, err: err, status: o.status, label: label}
	o.done = rep.written
	r.completer.submit(o)
}

// deliveryReport records a delivery's metrics, span and dead-letter log
// once its outcome is written (or found to be a zombie's).
type deliveryReport struct {
	relay     *Relay
	ctx       context.Context
	id        int64
	sink      string
	dedupKey  string
	attempt   int
	createdAt time.Time
	labels    *sinkLabels
	span      trace.Span
	elapsed   time.Duration
	err       error
	status    Status
	label     string
}

func (d *deliveryReport) written(ok bool) {
	r := d.relay
	if !ok {
		d.label = outcomeZombie
	} else if d.status == StatusDead {
		r.logger.Error("outbox: message dead-lettered",
			"id", d.id, "sink", d.sink, "dedup_key", d.dedupKey,
			"attempts", d.attempt, "last_error", d.err.Error())
	}
	r.metrics.recordDelivery(d.ctx, d.createdAt, d.labels, d.label, d.elapsed)
	endSpan(d.span, d.label, d.err)
}

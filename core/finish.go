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
	o.done = func(written bool) {
		if !written {
			label = outcomeZombie
		} else if o.status == StatusDead {
			r.logger.Error("outbox: message dead-lettered",
				"id", row.ID, "sink", row.Sink, "dedup_key", row.DedupKey,
				"attempts", row.Attempt, "last_error", *o.err)
		}
		r.metrics.recordDelivery(ctx, row, r.labels[sink.Name], label, elapsed)
		endSpan(span, label, err)
	}
	r.completer.submit(o)
}

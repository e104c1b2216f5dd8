package relay

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/operator"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/safetext"
	"github.com/outboxd/outboxd/internal/testsignal"
)

// finish turns a delivery's error into the row's next state and queues the
// terminal write:
//   - nil: sent;
//   - RetryAfter(d): back to pending after d without spending the attempt,
//     and the sink pauses cluster-wide until then;
//   - Permanent, or any error on the last attempt: dead, logged at ERROR;
//   - any other error: failed, retried after the sink's backoff.
func (r *Relay) finish(ctx context.Context, row claimedRow, sc SinkConfig, span trace.Span, elapsed time.Duration, err error) {
	o := completer.Outcome{ID: row.ID, Token: row.token, LeaseEnd: row.leaseUntil, Status: string(operator.StatusSent),
		Receipt: safetext.Receipt(row.Receipt()), Urgent: row.OrderingKey != ""}
	label := outcomeSent
	if err != nil {
		o.Err = r.storedError(err)
		if d, ok := sink.RetryAfterDelay(err); ok {
			o.Status, o.Delay, o.Refund, label = string(operator.StatusPending), d, 1, outcomeRateLimited
			if perr := r.limiter.Pause(ctx, row.Sink, d, r.q.Channel); perr != nil {
				r.logger.Warn("outbox: could not pause sink cluster-wide", "sink", row.Sink, "error", perr)
			}
		} else if sink.IsPermanent(err) || row.Attempt >= row.MaxAttempts {
			o.Status, label = string(operator.StatusDead), outcomeDead
		} else {
			o.Status, o.Delay, label = string(operator.StatusFailed), sc.Backoff.delay(row.Attempt), outcomeRetry
		}
	}
	// The report copies the few fields it needs: a closure over row and
	// sink would move both (hundreds of bytes) to the heap per delivery.
	rep := &deliveryReport{relay: r, ctx: ctx, id: row.ID, sink: row.Sink, dedupKey: row.DedupKey,
		attempt: row.Attempt, createdAt: row.CreatedAt, labels: r.labels[sc.Name], span: span,
		elapsed: elapsed, stored: o.Err, status: o.Status, label: label}
	o.Done = rep.written
	r.completer.Submit(o)
}

// release hands a claimed row back without spending its attempt, to be
// claimed again after delay.
func (r *Relay) release(row claimedRow, delay time.Duration, cause error) {
	r.completer.Submit(completer.Outcome{ID: row.ID, Token: row.token, Status: string(operator.StatusPending), Delay: delay,
		Err: r.storedError(cause), Refund: 1, LeaseEnd: row.leaseUntil, Urgent: row.OrderingKey != "",
		Done: func(ok bool) {
			r.signals.EmitWritten(testsignal.Outcome{ID: row.ID, Sink: row.Sink, Status: string(operator.StatusPending), Written: ok})
		}})
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
	stored    *string // the error as stored, nil for none
	status    string
	label     string
}

func (d *deliveryReport) written(ok bool) {
	r := d.relay
	if !ok {
		d.label = outcomeZombie
	} else if d.status == string(operator.StatusDead) {
		r.logger.Error("outbox: message dead-lettered",
			"id", d.id, "sink", d.sink, "dedup_key", d.dedupKey,
			"attempts", d.attempt, "last_error", *d.stored)
	}
	r.metrics.recordDelivery(d.ctx, d.createdAt, d.labels, d.label, d.elapsed)
	if t := r.tallies[d.sink]; t != nil {
		t.record(d.label, d.elapsed)
	}
	endSpan(d.span, d.label, d.stored)
	r.signals.EmitWritten(testsignal.Outcome{ID: d.id, Sink: d.sink, Status: d.status, Written: ok})
}

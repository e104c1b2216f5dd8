package relay

import (
	"time"

	"github.com/outboxd/outboxd/core/internal/breaker"
	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/sink"
)

// An outage must not kill a row before the receiver's breaker can act,
// whatever max_attempts: with max_attempts at or below the breaker's
// consecutive_failures, the failures that would open the breaker would
// otherwise each spend some row's last attempt, and an outage would
// dead-letter rows the receiver takes once it is back.
//
// So a row's last attempt that fails with a sign of the receiver's own
// trouble (breaker.Down: connection refused or reset, a timeout, 408,
// 502, 503, 504; breaker.Deferred: a 429 without Retry-After) while its
// breaker is closed, still deciding, is given back: the row is retried
// after its backoff, as a Retry-After deferral is, and counts one
// deferral. Either the breaker opens (the row then waits for the probe,
// its attempts untouched) or the receiver answers, and the row's next
// answer is its own. A 500 says as much about the message as about the
// receiver (the breaker counts it toward its failure share only): it
// spends the attempt, so a message the receiver always fails with 500
// dies after max_attempts. A permanent failure (4xx) kills the row as
// before.
//
// Nothing loops forever: each spared attempt counts toward the row's
// max_deferrals (SinkConfig.MaxDeferrals), and once those are spent the
// last attempt is spent too, so a message one receiver fails with 503
// forever while it takes the others still dies.

// spareLastAttempt turns o, the outcome err made of row's attempt, from
// dead into put off with its attempt given back and one deferral counted,
// when err is the receiver's outage on the row's last attempt and the
// receiver's breaker is closed, still deciding (see above). It runs in the
// write step, after the breaker counted err (settleBreaker), which holds a
// row whose breaker is open for the probe instead.
func (r *Relay) spareLastAttempt(row *claimedRow, sc SinkConfig, err error, o *completer.Outcome) {
	sb := r.breakers[row.Sink]
	if sb == nil || err == nil || row.probe || row.Attempt < row.MaxAttempts || row.deferrals >= sc.MaxDeferrals {
		return
	}
	if _, deferred := sink.RetryAfterDelay(err); deferred || sink.IsPermanent(err) {
		return
	}
	if sig := breaker.Classify(err); sig != breaker.Down && sig != breaker.Deferred {
		return
	}
	r.retryInstead(row, o, sc.deferral(row, 0), err)
	o.Deferred = 1
}

// retryInstead turns o, the outcome err made of row's attempt, into the
// row handed back with its attempt given back, due after delay.
func (r *Relay) retryInstead(row *claimedRow, o *completer.Outcome, delay time.Duration, err error) {
	kept := r.releaseOutcome(row, delay, err)
	kept.Done = o.Done
	row.report.status, row.report.label = kept.Status, outcomeRetry
	*o = kept
}

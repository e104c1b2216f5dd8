// Package connretry is the schedule on which the relay retries a statement
// that failed for a reason a retry can get past (see package pgerr).
//
// The first retry is immediate. The usual such failure is a connection
// PostgreSQL ended while the pool still held it (pg_terminate_backend, a
// restart, a proxy's idle timeout): the statement fails on first use, the
// pool destroys the connection, and the retry runs on another one. Waiting
// before that retry buys nothing, and it costs more than the one delivery:
// a killed idle connection is found only when used, so a relay whose
// connections are ended several times a second and that slept a second
// after each such failure found most of its pool dead again when it woke,
// failed again, and delivered a fraction of its load. Failures in a row
// then back off exponentially, so a database that is really away is not
// hammered.
//
// One immediate retry is not always enough: a pool may hold several
// connections ended while idle, and the longer a loop waits the more of
// them are. Pooled sees each error: it retries failures on open
// connections at once, as many in a row as the pool holds connections,
// and backs off for failures to connect. Do runs a statement on that
// schedule; a loop that retries across iterations of its own keeps a
// Pooled itself.
package connretry

import (
	"context"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/outboxd/outboxd/core/internal/pgerr"
)

// Pooled is the retry schedule of a statement run through a pool of
// connections, for a caller that has each failure's error.
type Pooled struct {
	// atOnce is how many more failures on open connections are retried
	// without a wait.
	atOnce  int
	backoff retry.Backoff
}

// NewPooled returns the schedule of a statement run through a pool of at
// most conns connections. Each failure on a connection that had been open
// is retried at once, conns+1 in a row at most: such a failure ends its
// connection, so by then the pool has opened a fresh one. A failure to
// connect, and each failure after those, waits initial, doubling up to
// max.
func NewPooled(initial, max time.Duration, conns int) *Pooled {
	return &Pooled{atOnce: conns + 1, backoff: retry.WithCappedDuration(max, retry.NewExponential(initial))}
}

// Next returns how long to wait before retrying the statement that has
// just failed with err.
func (p *Pooled) Next(err error) time.Duration {
	if !pgerr.ConnectFailed(err) && p.atOnce > 0 {
		p.atOnce--
		return 0
	}
	wait, _ := p.backoff.Next()
	return wait
}

// Do runs f until it succeeds, fails with an error a retry cannot get past
// (see pgerr.IsTransient), or ctx ends, and returns its value. Between
// attempts it waits on the schedule of NewPooled(initial, max, conns),
// conns being the most connections of the pool f runs on.
func Do[T any](ctx context.Context, initial, max time.Duration, conns int, f func(context.Context) (T, error)) (T, error) {
	schedule := NewPooled(initial, max, conns)
	var last error
	next := retry.BackoffFunc(func() (time.Duration, bool) { return schedule.Next(last), false })
	return retry.DoValue(ctx, next, func(ctx context.Context) (T, error) {
		v, err := f(ctx)
		last = err
		if err != nil && pgerr.IsTransient(err) {
			return v, retry.RetryableError(err)
		}
		return v, err
	})
}

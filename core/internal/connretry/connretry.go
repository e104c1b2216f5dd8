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
// New's schedule cannot see the errors, and one immediate retry is not
// always enough: a pool may hold several connections ended while idle,
// and the longer a loop waits the more of them are. Pooled sees each
// error: it retries failures on open connections at once, as many in a
// row as the pool holds connections, and backs off for failures to
// connect.
package connretry

import (
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/outboxd/outboxd/core/internal/pgerr"
)

// New returns a schedule that retries at once, then after initial, doubling
// up to max, forever (the caller's context ends it).
func New(initial, max time.Duration) retry.Backoff {
	next := retry.WithCappedDuration(max, retry.NewExponential(initial))
	first := true
	return retry.BackoffFunc(func() (time.Duration, bool) {
		if first {
			first = false
			return 0, false
		}
		return next.Next()
	})
}

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

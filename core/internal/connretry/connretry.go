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
package connretry

import (
	"time"

	"github.com/sethvargo/go-retry"
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

package relay

import (
	"time"

	"github.com/sethvargo/go-retry"
)

// backoffJitterPercent spreads retries of messages that failed together, so
// an outage's backlog does not come back as one burst.
const backoffJitterPercent = 10

// maxBackoffDoublings stops the exponential before it overflows; the cap is
// reached long before anyway.
const maxBackoffDoublings = 40

// delay returns how long to wait before retrying after the given failed
// attempt (1 for the first): Initial, doubling per attempt, jittered, then
// capped at Max.
func (b Backoff) delay(attempt int) time.Duration {
	schedule := retry.WithCappedDuration(b.Max,
		retry.WithJitterPercent(backoffJitterPercent, retry.NewExponential(b.Initial)))
	var d time.Duration
	for i := 0; i < min(attempt, maxBackoffDoublings); i++ {
		d, _ = schedule.Next()
	}
	return d
}

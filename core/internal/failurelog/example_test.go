package failurelog_test

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/outboxd/outboxd/core/internal/failurelog"
)

// A receiver failing three attempts over a minute and a half, then
// recovering: one WARN for the first failure, one summary once a minute
// has passed, one INFO for the recovery.
func Example() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output
			}
			return a
		}}))
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	log := failurelog.New(logger, error.Error, func() time.Time { return now })
	partner := failurelog.Receiver{Sink: "partner"}
	down := errors.New("HTTP 503 Service Unavailable")

	log.Attempted(partner, 1, down)
	now = now.Add(30 * time.Second)
	log.Attempted(partner, 1, down) // within the minute: nothing
	now = now.Add(30 * time.Second)
	log.Attempted(partner, 1, down)
	now = now.Add(30 * time.Second)
	log.Attempted(partner, 1, nil)
	// Output:
	// level=WARN msg="outbox: delivery failed; more failures at this destination are summarised at most every 1m0s until one succeeds" sink=partner id=1 error="HTTP 503 Service Unavailable"
	// level=WARN msg="outbox: 2 failures in the last 1m0s" sink=partner failures=2 streak_failures=3 failing_for=1m0s last_error="HTTP 503 Service Unavailable"
	// level=INFO msg="outbox: deliveries succeed again" sink=partner failures=3 failing_for=1m30s
}

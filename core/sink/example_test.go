package sink_test

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// partnerSink posts to partners, each its own rate key; a partner
// on the premium plan may take 50 deliveries a second, the others share
// the sink's per-key limit.
type partnerSink struct{ premium map[string]bool }

func (partnerSink) Deliver(context.Context, *sink.Delivery) error { return nil }

func (partnerSink) RateKey(d *sink.Delivery) (string, error) { return d.Headers["partner"], nil }

func (s partnerSink) KeyRateLimit(_ context.Context, partner string) (sink.RateLimit, bool) {
	if !s.premium[partner] {
		return sink.RateLimit{}, false
	}
	return sink.RateLimit{Rate: 50, Per: time.Second, Burst: 50}, true
}

// A sink limited per key gives some keys a limit of their own: the relay
// spaces the premium partner's deliveries 20ms apart and the others by
// the sink's RateLimit.
func ExampleKeyRateLimiter() {
	var s sink.Sink = partnerSink{premium: map[string]bool{"acme": true}}
	limiter := s.(sink.KeyRateLimiter)
	for _, partner := range []string{"acme", "initech"} {
		if l, own := limiter.KeyRateLimit(context.Background(), partner); own {
			fmt.Println(partner, "every", l.Interval())
		} else {
			fmt.Println(partner, "by the sink's limit")
		}
	}
	// Output:
	// acme every 20ms
	// initech by the sink's limit
}

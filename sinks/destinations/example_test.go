package destinations_test

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/sinks/destinations"
)

// A destinations sink tells the relay how long a destination's breaker
// may stay open before the destination is disabled (sink.AutoDisabler),
// and each destination's own rate limit (sink.KeyRateLimiter): none
// before the serving process publishes the destinations, so every
// destination takes the sink's limit.
func Example() {
	s, err := destinations.Type.New("customers", map[string]any{"auto_disable_after": "24h"}, sink.Env{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.(sink.AutoDisabler).AutoDisableAfter())
	_, own := s.(sink.KeyRateLimiter).KeyRateLimit(context.Background(), "dst_kx2m4fq7rj3v5wzp")
	fmt.Println(own, s.(sink.RateLimitDefaulter).DefaultRateLimit().Interval())
	// Output:
	// 24h0m0s
	// false 100ms
}

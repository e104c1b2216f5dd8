package destinations_test

import (
	"context"
	"fmt"

	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/destinations"
	sinkdest "github.com/outboxd/outboxd/sinks/destinations"
)

// The relay learns what a destinations sink needs from the configuration
// HookRelay completes: how long a destination's breaker may stay open
// before the destination is disabled, and each destination's own rate
// limit (none before the serving process publishes the destinations, so
// every destination takes the sink's limit).
func ExampleHookRelay() {
	s, err := sinkdest.Type.New("customers", map[string]any{"auto_disable_after": "24h"}, sink.Env{})
	if err != nil {
		fmt.Println(err)
		return
	}
	sc := relay.SinkConfig{Name: "customers", Sink: s}
	destinations.HookRelay(&sc)
	fmt.Println(sc.AutoDisableAfter)
	_, own := sc.KeyRateLimit(context.Background(), "dst_kx2m4fq7rj3v5wzp")
	fmt.Println(own, s.(sink.RateLimitDefaulter).DefaultRateLimit().Interval())
	// Output:
	// 24h0m0s
	// false 100ms
}

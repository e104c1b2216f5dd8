package destinations_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// TestDestinationRateLimitHoldsAcrossRelays runs two `outboxd serve`
// relays of one outbox and two destinations: slowco with a rate_limit of
// 2 a second, fastco with none (the sink's default, 10 a second). Their
// events are published together, interleaved, so every claim holds both.
// At the receiver, slowco's deliveries arrive at its own 2 a second
// (after a burst of a second's worth), across both relays, and fastco's
// are not slowed to that pace.
//
// Mutations checked: making the destinations sink's KeyRateLimit answer
// ok false (the relay ignoring a destination's rate_limit) delivers
// slowco's 9 events within a fraction of a second; making it answer 2 a
// second for every destination holds fastco to 2 a second (9s for 20).
func TestDestinationRateLimitHoldsAcrossRelays(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	o := serve(t, setup{poll: "200ms"})
	o.serveAnother(t)
	var slow, fast destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/slowco/destinations", map[string]any{"url": rcv.URL + "/slowco", "rate_limit": 2}, &slow)
	o.call(t, http.MethodPost, "/v1/tenants/fastco/destinations", map[string]any{"url": rcv.URL + "/fastco"}, &fast)
	if slow.RateLimit == nil || *slow.RateLimit != 2 || fast.RateLimit != nil {
		t.Fatalf("created rate limits %v and %v, want 2 and none", slow.RateLimit, fast.RateLimit)
	}

	const slowRows, fastRows = 9, 20
	var events [][3]string
	for i := range fastRows {
		if i < slowRows {
			events = append(events, [3]string{"order.created", "slowco", fmt.Sprintf("s%d", i)})
		}
		events = append(events, [3]string{"order.created", "fastco", fmt.Sprintf("f%d", i)})
	}
	o.publishSQL(t, true, events...)
	testrelay.WaitFor(t, deliveryTimeout, "every event delivered", func() bool {
		return rcv.count("/slowco") == slowRows && rcv.count("/fastco") == fastRows
	})

	slowAt, fastAt := rcv.times("/slowco"), rcv.times("/fastco")
	// 2 a second with a burst of 2: at most 4 start within any second.
	if got := testrelay.MaxInWindow(slowAt, time.Second); got > 4 {
		t.Errorf("slowco got %d deliveries within one second; its rate_limit of 2 a second allows 2+2", got)
	}
	// 2 at once, then one every half second: 3.5s for 9.
	span := slowAt[len(slowAt)-1].Sub(slowAt[0])
	if span < 3*time.Second || span > 7*time.Second {
		t.Errorf("slowco's %d deliveries took %s, want about 3.5s at 2 a second", slowRows, span)
	}
	// At slowco's pace fastco's 20 would take 9.5s; at its own, about 1s.
	if fastSpan := fastAt[len(fastAt)-1].Sub(fastAt[0]); fastSpan > 2500*time.Millisecond {
		t.Errorf("fastco's %d deliveries took %s: slowed by slowco's limit (its own allows 10 a second)", fastRows, fastSpan)
	}
	t.Logf("slowco: %d deliveries in %s; fastco: %d in %s", slowRows, span, fastRows, fastAt[len(fastAt)-1].Sub(fastAt[0]))
}

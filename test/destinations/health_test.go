package destinations_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/destinations"
	"github.com/outboxd/outboxd/internal/testkit/testrelay"
	"github.com/outboxd/outboxd/server/api"
)

// pauseFor is the Retry-After the throttling receiver answers first.
const pauseFor = 4 * time.Second

// A receiver that answers 429 with a Retry-After has its destination shown
// paused until the time it asked for, with the 429 as its last failure;
// once the pause ends and the receiver takes the delivery, the
// destination is healthy again, with that success. (A Retry-After's
// answer refunds its attempt, so it counts as a failure only while the
// row it put off waits: destination_health.sql.) (Mutations, each failing
// this test: healthOf without its Retry-After case, the destination shown
// healthy while its deliveries wait; destination_health.sql without the
// waiting row's answer, the paused destination showing no failure.)
func TestHealthShowsAReceiversRetryAfterAsAPause(t *testing.T) {
	t.Parallel()
	var answered atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if answered.Add(1) == 1 {
			w.Header().Set("Retry-After", fmt.Sprint(int(pauseFor.Seconds())))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	o := serve(t, setup{poll: "200ms"})
	var dst destinations.Created
	o.call(t, http.MethodPost, "/v1/tenants/acme/destinations", map[string]any{"url": rcv.URL + "/acme"}, &dst)
	health := func() destinations.Health {
		var d api.DestinationDetail
		o.call(t, http.MethodGet, "/v1/tenants/acme/destinations/"+dst.ID, nil, &d)
		return d.Health
	}
	if h := health(); h.State != destinations.HealthHealthy || h.LastFailure != nil {
		t.Fatalf("a new destination's health: %+v, want healthy without a failure", h)
	}

	asked := time.Now()
	o.publishSQL(t, true, [3]string{"order.created", "acme", "o1"})
	var paused destinations.Health
	testrelay.WaitFor(t, deliveryTimeout, "the destination shown paused", func() bool {
		paused = health()
		return paused.State == destinations.HealthPaused
	})
	if u := paused.Until; u == nil || u.Before(asked.Add(pauseFor-time.Second)) || u.After(time.Now().Add(pauseFor+time.Second)) {
		t.Errorf("paused until %v, want about %s after the 429 (%s)", u, pauseFor, asked.Format(time.RFC3339Nano))
	}
	if paused.LastFailure == nil || !strings.Contains(paused.LastError, "429") {
		t.Fatalf("paused destination's last failure: %v %q, want the 429", paused.LastFailure, paused.LastError)
	}

	var healed destinations.Health
	testrelay.WaitFor(t, deliveryTimeout, "the destination healthy after the pause", func() bool {
		healed = health()
		return healed.State == destinations.HealthHealthy && healed.LastSuccess != nil
	})
	if n := answered.Load(); n != 2 {
		t.Errorf("the receiver answered %d requests, want 2: the 429 and the delivery after the pause", n)
	}
	if !healed.LastSuccess.After(*paused.LastFailure) {
		t.Errorf("healthy again: last success %v, not after the 429 at %v", healed.LastSuccess, paused.LastFailure)
	}
}

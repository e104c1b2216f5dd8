package webhook_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/webhook"
)

// busyFor is the wait the contract test's busy receiver asks for, in
// whole seconds as Retry-After says it.
const busyFor = 7 * time.Second

// The webhook sink keeps the sink contract (package sinktest) against
// httptest receivers: one that accepts, and one per failure.
func TestWebhookKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	accepting := newReceiver(t, accept)
	to := func(t testing.TB, url string) sink.Sink {
		t.Helper()
		s, err := webhook.Type.New(sinktest.SinkName, map[string]any{"url": url, "allow_private": true}, sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// answering arranges a receiver of its own answering status, with a
	// Retry-After of delay when it is not 0.
	answering := func(status int, delay time.Duration) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case {
			rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
				if delay > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(int(delay/time.Second)))
				}
				w.WriteHeader(status)
			})
			return sinktest.Case{Sink: to(t, rc.URL), Delay: delay}
		}
	}
	sinktest.Run(t, sinktest.Harness{
		New:        func(t testing.TB) sink.Sink { return to(t, accepting.URL) },
		Received:   func(testing.TB) []string { return webhookIDs(accepting) },
		Retryable:  answering(http.StatusServiceUnavailable, 0),
		Permanent:  answering(http.StatusBadRequest, 0),
		RetryAfter: answering(http.StatusTooManyRequests, busyFor),
		Hang: func(t testing.TB) sinktest.Case {
			// newReceiver reads the body first, after which the server
			// notices the sink giving up.
			rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
			return sinktest.Case{Sink: to(t, rc.URL)}
		},
	})
}

// webhookIDs returns the webhook-id of every request rc received.
func webhookIDs(rc *receiver) []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	ids := make([]string, len(rc.reqs))
	for i, r := range rc.reqs {
		ids[i] = r.header.Get("webhook-id")
	}
	return ids
}

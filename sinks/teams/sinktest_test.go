package teams_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/teams/faketeams"
)

// The teams sink keeps the sink contract (package sinktest) against the
// fake Workflows webhook: its own refusal of a wrong signature is the
// permanent answer, injected faults the others.
func TestTeamsKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	// failing makes the fake's next request answer f.
	failing := func(f faketeams.Fault) func(testing.TB) sinktest.Case {
		return func(testing.TB) sinktest.Case {
			fake.Inject(f)
			return sinktest.Case{Delay: f.RetryAfter}
		}
	}
	const busyFor = 7 * time.Second
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return build(t, sinktest.SinkName, fake.WebhookURL()) },
		Received: func(testing.TB) []string {
			var ids []string
			for _, p := range fake.Posts() {
				ids = append(ids, p.DeliveryID)
			}
			return ids
		},
		Retryable: failing(faketeams.Fault{Status: http.StatusBadGateway}),
		Permanent: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: build(t, sinktest.SinkName, fake.URLWithSig("expired"))}
		},
		RetryAfter: failing(faketeams.Fault{Status: http.StatusTooManyRequests, RetryAfter: busyFor}),
		Hang:       failing(faketeams.Fault{Delay: time.Minute}),
	})
}

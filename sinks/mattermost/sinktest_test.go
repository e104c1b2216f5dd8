package mattermost_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/mattermost/fakemattermost"
)

// The mattermost sink keeps the sink contract (package sinktest) against
// the fake server: its own refusal of an unknown hook is the permanent
// answer, injected faults the others. A post's props carry the delivery
// id.
func TestMattermostKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	// failing makes the fake's next request answer f.
	failing := func(f fakemattermost.Fault) func(testing.TB) sinktest.Case {
		return func(testing.TB) sinktest.Case {
			fake.Inject(f)
			return sinktest.Case{Delay: f.RetryAfter}
		}
	}
	const busyFor = 7 * time.Second
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink {
			return build(t, sinktest.SinkName, fake.HookURL(fakemattermost.Hook), nil)
		},
		Received:  func(testing.TB) []string { return deliveryIDs(fake) },
		Retryable: failing(fakemattermost.Fault{Status: http.StatusInternalServerError}),
		Permanent: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: build(t, sinktest.SinkName, fake.HookURL("deletedhookkey"), nil)}
		},
		RetryAfter: failing(fakemattermost.Fault{Status: http.StatusTooManyRequests, RetryAfter: busyFor}),
		Hang:       failing(fakemattermost.Fault{Delay: time.Minute}),
	})
}

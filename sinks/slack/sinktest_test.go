package slack_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/slack"
	"github.com/outboxd/outboxd/sinks/slack/fakeslack"
)

// The slack sink keeps the sink contract (package sinktest) against the
// fake Slack, each failure injected into its next chat.postMessage.
func TestSlackKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	to := func(t testing.TB, fake *fakeslack.Server) sink.Sink {
		t.Helper()
		s, err := slack.Type.New(sinktest.SinkName, tokenOptions(fake, nil), sink.Env{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// failing makes the fake's next post answer with f.
	failing := func(f fakeslack.Fault) func(testing.TB) sinktest.Case {
		return func(testing.TB) sinktest.Case {
			fake.Inject(fakeslack.MethodPostMessage, f)
			return sinktest.Case{Delay: f.RetryAfter}
		}
	}
	const busyFor = 7 * time.Second
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, fake) },
		// A post's metadata is what a retry recognises it by.
		Received: func(testing.TB) []string {
			var ids []string
			for _, p := range fake.Posts() {
				md := p.Metadata.EventPayload
				ids = append(ids, fmt.Sprintf("%v/%v", md[slack.MetadataKeySink], md[slack.MetadataKeyDedup]))
			}
			return ids
		},
		Retryable:   failing(fakeslack.Fault{Status: 500}),
		Permanent:   failing(fakeslack.Fault{Error: "channel_not_found"}),
		RetryAfter:  failing(fakeslack.Fault{Status: 429, RetryAfter: busyFor}),
		Hang:        failing(fakeslack.Fault{Delay: time.Minute}),
		Spoil:       func(d *sink.Delivery) { d.Payload = []byte(`{}`) }, // neither text nor blocks
		Unreachable: func(t testing.TB) sink.Sink { return to(t, stoppedFake()) },
	})
}

package discord_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/sinks/discord/fakediscord"
)

// The discord sink keeps the sink contract (package sinktest) against the
// fake Discord, each failure injected into its next request.
//
// Received is nil, so the kit skips its delivery-id check: a Discord
// webhook takes no idempotency key and the sink sends none (docs/discord.md,
// "Exactly once"); the count of messages per delivery is checked by this
// package's other tests and its relay test.
func TestDiscordKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	fake.SetLimit(1000, time.Minute) // the kit's checks are not about the bucket
	failing := func(f fakediscord.Fault, delay time.Duration) func(testing.TB) sinktest.Case {
		return func(testing.TB) sinktest.Case {
			fake.Inject(f)
			return sinktest.Case{Delay: delay}
		}
	}
	const busyFor = 7 * time.Second
	sinktest.Run(t, sinktest.Harness{
		New:        func(t testing.TB) sink.Sink { return newSink(t, sinktest.SinkName, fake.URL(), nil) },
		Retryable:  failing(fakediscord.Fault{Status: 500}, 0),
		Permanent:  failing(fakediscord.Fault{Status: 400, Body: `{"code": 50035, "message": "Invalid Form Body"}`}, 0),
		RetryAfter: failing(fakediscord.Fault{Status: 429, Body: `{"message": "You are being rate limited.", "retry_after": 7, "global": false}`}, busyFor),
		Hang:       failing(fakediscord.Fault{Delay: time.Minute}, 0),
		Spoil:      func(d *sink.Delivery) { d.Payload = []byte(`{}`) }, // neither content nor embeds
		Unreachable: func(t testing.TB) sink.Sink {
			stopped := fakediscord.New()
			stopped.Close()
			return newSink(t, sinktest.SinkName, stopped.URL(), nil)
		},
	})
}

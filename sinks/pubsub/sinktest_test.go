package pubsub_test

import (
	"strconv"
	"testing"

	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/grpc/codes"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	"github.com/outboxd/outboxd/internal/testkit/proc"
	pubsubsink "github.com/outboxd/outboxd/sinks/pubsub"
)

// The pubsub sink keeps the sink contract (package sinktest) against the
// client library's fake: a topic with a subscription, a topic that does not
// exist (NOT_FOUND), a fake out of quota, a listener that never answers
// and a port nothing listens on.
func TestPubSubKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	sub := f.topic(t, "events")
	to := func(t testing.TB, o map[string]any) sink.Sink { return build(t, sinktest.SinkName, o) }
	at := func(o map[string]any) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, o)} }
	}
	withEndpoint := func(addr string) map[string]any {
		o := f.options(sub.topic)
		o["endpoint"] = addr
		return o
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t testing.TB) sink.Sink { return to(t, f.options(sub.topic)) },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, r := range sub.read(t) {
				ids = append(ids, r.ID)
			}
			return ids
		},
		Retryable: at(withEndpoint("127.0.0.1:" + strconv.Itoa(proc.FreePort(t)))),
		Permanent: at(f.options("missing")),
		RetryAfter: func(t testing.TB) sinktest.Case {
			full := newFake(t, pstest.WithErrorInjection("Publish", codes.ResourceExhausted, "quota exceeded"))
			return sinktest.Case{Sink: to(t, full.options(full.topic(t, "events").topic)), Delay: pubsubsink.DefaultQuotaPause}
		},
		Hang: func(t testing.TB) sinktest.Case {
			// Closing the sink waits for the abandoned publish up to its
			// timeout: a short one keeps the check short.
			o := withEndpoint(sinktest.SilentAddr(t))
			o["timeout"] = "1s"
			return sinktest.Case{Sink: to(t, o)}
		},
		Spoil: func(d *sink.Delivery) { d.Headers["goog-spoiled"] = "1" },
	})
}

package redis_test

import (
	"testing"

	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/core/sink/sinktest"
	redissink "github.com/outboxd/outboxd/sinks/redis"
)

// The redis sink keeps the sink contract (package sinktest) against the
// machine's redis-server: a stream of the test's own, a key that holds a
// string (WRONGTYPE), a private server out of memory, a listener that
// never answers and a port nothing listens on.
func TestRedisKeepsTheSinkContract(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	if err := sp.client.Set(t.Context(), sp.prefix+"a-string", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	closed := closedURL(t)
	to := func(t testing.TB, url, stream string) sink.Sink {
		o := sp.options(url, stream)
		o["connect_timeout"] = "1s"
		return build(t, sinktest.SinkName, o)
	}
	at := func(url, stream string) func(testing.TB) sinktest.Case {
		return func(t testing.TB) sinktest.Case { return sinktest.Case{Sink: to(t, url, stream)} }
	}
	// The stream is named by a header every delivery carries (Prepare);
	// a delivery without it cannot be routed (Spoil).
	const stream = "{{.Headers.stream}}"
	sinktest.Run(t, sinktest.Harness{
		New:     func(t testing.TB) sink.Sink { return to(t, url, stream) },
		Prepare: func(d *sink.Delivery) { d.Headers["stream"] = "events" },
		Received: func(t testing.TB) []string {
			var ids []string
			for _, e := range sp.entries(t, "events") {
				ids = append(ids, e.ID)
			}
			return ids
		},
		Retryable: at(closed, "events"),
		Permanent: at(url, "a-string"),
		RetryAfter: func(t testing.TB) sinktest.Case {
			// A server whose memory is full (any write refused with OOM).
			full := privateServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
			return sinktest.Case{Sink: to(t, full, "events"), Delay: redissink.DefaultOOMPause}
		},
		Hang: func(t testing.TB) sinktest.Case {
			return sinktest.Case{Sink: to(t, "redis://"+sinktest.SilentAddr(t), "events")}
		},
		Spoil:       func(d *sink.Delivery) { delete(d.Headers, "stream") },
		Unreachable: func(t testing.TB) sink.Sink { return to(t, closed, "events") },
	})
}

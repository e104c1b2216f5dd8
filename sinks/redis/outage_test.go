package redis_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A server that is unreachable when the relay starts, and again mid-run (a
// proxy in front of it refuses and cuts connections), only delays
// delivery: messages wait in the outbox, reach the stream once it is back,
// each once, and none is dead-lettered.
// Mutation: wrapping Acquire's error and classify's default with
// sink.Permanent dead-letters the rows and fails it.
func TestServerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	addr := serverAddr(t)
	sp := newSpace(t, "redis://"+addr)
	proxy := brokertest.NewProxy(t, addr)
	proxy.Down()
	tg := sp.target("redis://"+proxy.Addr(), "events", "events")
	tg.Options["connect_timeout"], tg.Options["timeout"] = "1s", "2s"
	brokertest.Outage(t, tg, "events", proxy.Down, proxy.Up)
}

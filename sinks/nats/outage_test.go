package nats_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A server that is down when the relay starts, and again mid-run (a
// private nats-server killed and started again on its store), only delays
// delivery: messages wait in the outbox, reach the stream once the server
// is back, exactly once, and none is dead-lettered. (Mutation: a failed
// dial in sinks.Connection made permanent fails this test; so does
// sinks.Connection never redialing a connection that broke mid-run, which
// dead-letters rows once the retry budget is spent.)
func TestServerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	srv := brokertest.NewNATSServer(t)
	var st *testStream
	tg := target(srv.URL(), "OUTAGE.events", &st)
	tg.Options["connect_timeout"] = "1s"
	brokertest.Outage(t, tg, "events", srv.Stop, func() {
		srv.Start()
		if st == nil {
			st = newStreamNamed(t, srv.URL(), "OUTAGE")
		}
	})
}

package nats_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
)

// outageWait bounds the wait for the relay to notice the server is away.
const outageWait = 30 * time.Second

// A server that is down when the relay starts, and again mid-run, only
// delays delivery: messages wait in the outbox, reach the stream once the
// server is back, exactly once, and none is dead-lettered.
func TestServerDownAtStartAndMidRun(t *testing.T) {
	t.Parallel()
	srv := brokertest.NewNATSServer(t)
	pool, ob := testdb.New(t)
	const subject = "OUTAGE.events"
	sink := build(t, "events", map[string]any{"url": srv.URL(), "subject": subject, "connect_timeout": "1s"})
	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "events", Sink: sink})

	first := brokertest.Messages("events", "before", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, first); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	srv.Start()
	st := newStreamNamed(t, srv.URL(), "OUTAGE")
	brokertest.WaitSent(t, pool, ob, "events", int64(len(first)), deliverTimeout)

	srv.Stop()
	second := brokertest.Messages("events", "during", 20)
	if _, err := ob.EnqueueBatch(t.Context(), pool, second); err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFailedAttempt(t, pool, ob, outageWait)
	srv.Start()
	brokertest.WaitSent(t, pool, ob, "events", int64(len(first)+len(second)), deliverTimeout)

	brokertest.CheckDelivered(t, append(first, second...), st.messages(t), true)
	if dead := testdb.StatusCounts(t, pool, ob, "events")["dead"]; dead > 0 {
		t.Errorf("%d messages dead-lettered by a short outage", dead)
	}
}

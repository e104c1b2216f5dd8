package core_test

import (
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
)

func TestRelayDeliversEnqueuedMessages(t *testing.T) {
	b := setup(t)
	sink := newRecordingSink()
	startRelay(t, b.pool, core.Config{Outbox: b.ob, Sinks: []core.SinkConfig{{Name: "rec", Sink: sink}}})
	enqueueN(t, b, "rec", 100, nil)
	waitFor(t, 30*time.Second, "100 deliveries", func() bool { return len(sink.snapshot()) >= 100 })
	waitFor(t, 10*time.Second, "100 sent rows", func() bool { return statusCounts(t, b)["sent"] == 100 })
}

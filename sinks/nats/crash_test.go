package nats_test

import (
	"testing"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/brokertest"
	"github.com/outboxd/outboxd/internal/testdb"
	natssink "github.com/outboxd/outboxd/sinks/nats"
)

// A relay SIGKILLed mid-publish leaves messages in the stream whose rows
// are still in progress; the relay that takes them over publishes them
// again under the same Nats-Msg-Id, and the stream, deduplicating within
// its window, ends with every message exactly once.
func TestRelayKilledMidPublishLeavesEachMessageOnceInTheStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	pool, ob := testdb.New(t)
	options := map[string]any{"url": url, "subject": st.subject}
	msgs := brokertest.Messages("events", "crash", 300)
	if _, err := ob.EnqueueBatch(t.Context(), pool, msgs); err != nil {
		t.Fatal(err)
	}

	brokertest.Crash(t, ob, natssink.Type, "events", options, 100, "TestCrashChild")
	if held := st.count(t); held < 100 {
		t.Fatalf("the stream holds %d messages after the crash, want at least the 100 acknowledged", held)
	}

	brokertest.Relay(t, pool, ob, nil, core.SinkConfig{Name: "events", Sink: build(t, "events", options)})
	brokertest.WaitSent(t, pool, ob, "events", int64(len(msgs)), deliverTimeout)
	if n := st.count(t); n != uint64(len(msgs)) {
		t.Errorf("the stream holds %d messages, want exactly %d", n, len(msgs))
	}
	brokertest.CheckDelivered(t, msgs, st.messages(t), true)
	var deduplicated int
	if err := pool.QueryRow(t.Context(),
		"SELECT count(*) FROM "+ob.Schema()+".messages WHERE (receipt->>'duplicate')::boolean").Scan(&deduplicated); err != nil {
		t.Fatal(err)
	}
	if deduplicated == 0 {
		t.Error("no row was published twice: the crash left no acknowledged message unrecorded")
	}
	t.Logf("%d redelivered messages dropped by the stream's duplicate window", deduplicated)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

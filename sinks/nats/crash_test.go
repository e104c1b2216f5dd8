package nats_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-publish leaves messages in the stream whose rows
// are still in progress; the relay that takes them over publishes them
// again under the same Nats-Msg-Id, and the stream, deduplicating within
// its window, ends with every message exactly once. (Mutation: publishing
// without WithMsgID fails this test.)
func TestRelayKilledMidPublishLeavesEachMessageOnceInTheStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	st := newStream(t, url)
	pool, ob, _ := brokertest.CrashMidPublish(t, target(url, st.subject, &st), "events", "TestCrashChild")
	var deduplicated int
	if err := pool.QueryRow(t.Context(),
		"SELECT count(*) FROM "+ob.Schema()+".messages_all WHERE (receipt->>'duplicate')::boolean").Scan(&deduplicated); err != nil {
		t.Fatal(err)
	}
	if deduplicated == 0 {
		t.Error("no row was published twice: the crash left no acknowledged message unrecorded")
	}
	t.Logf("%d redelivered messages dropped by the stream's duplicate window", deduplicated)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

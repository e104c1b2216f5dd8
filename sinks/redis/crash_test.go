package redis_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-publish leaves entries in the stream whose rows are
// still in progress; the relay that takes them over delivers them again
// under the same delivery id, the script finds each one's key, and the
// stream ends with every message exactly once; the receipts of the rows
// delivered twice say so.
// Mutation: skipping the key check in addonce.lua (if false then) fails it
// with duplicate entries.
func TestRelayKilledMidPublishLeavesEachMessageOnceInTheStream(t *testing.T) {
	t.Parallel()
	url := serverURL(t)
	sp := newSpace(t, url)
	pool, ob, _ := brokertest.CrashMidPublish(t, sp.target(url, "events", "events"), "events", "TestCrashChild")
	var deduplicated int
	if err := pool.QueryRow(t.Context(),
		"SELECT count(*) FROM "+ob.Schema()+".messages_all WHERE (receipt->>'duplicate')::boolean").Scan(&deduplicated); err != nil {
		t.Fatal(err)
	}
	if deduplicated == 0 {
		t.Error("no row was delivered twice: the crash left no added entry unrecorded")
	}
	t.Logf("%d redelivered messages found their entry and added none", deduplicated)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

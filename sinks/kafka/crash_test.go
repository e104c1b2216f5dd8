package kafka_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-produce leaves acknowledged records whose rows are
// still in progress; the relay that takes them over produces them again
// (a new producer id, so the idempotent producer cannot drop them). The
// topic holds every message at least once, and each copy carries the same
// dedup key header, record key and payload, so a consumer can drop the
// second. (Mutation: a dedup key header that changes with the attempt
// fails this test.)
func TestRelayKilledMidProduceDeliversAtLeastOnceUnderOneDedupKey(t *testing.T) {
	t.Parallel()
	tg := target(newCluster(t).ListenAddrs()...)
	tg.Check = keyedByDedupKey
	_, _, duplicates := brokertest.CrashMidPublish(t, tg, "events", "TestCrashChild")
	if duplicates == 0 {
		t.Error("no message arrived twice: the crash left no acknowledged record unrecorded")
	}
	t.Logf("%d duplicates, each under its original dedup key header", duplicates)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

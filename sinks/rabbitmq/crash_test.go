package rabbitmq_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-publish leaves confirmed messages whose rows are
// still in progress; the relay that takes them over publishes them again.
// RabbitMQ does not deduplicate, so the queue holds every message at least
// once, and each copy carries the same message-id (the dedup key) and
// payload, so a consumer can drop the second. (Mutation: publishing
// without MessageId fails this test.)
func TestRelayKilledMidPublishDeliversAtLeastOnceUnderOneMessageID(t *testing.T) {
	t.Parallel()
	addr := requireBroker(t)
	_, _, duplicates := brokertest.CrashMidPublish(t, target(addr, newQueue(t, addr)), "orders", "TestCrashChild")
	if duplicates == 0 {
		t.Error("no message arrived twice: the crash left no confirmed message unrecorded")
	}
	t.Logf("%d duplicates, each under its original message-id", duplicates)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

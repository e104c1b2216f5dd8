package pubsub_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-publish leaves messages Pub/Sub stored whose rows
// are still in progress; the relay that takes them over publishes them
// again: every message reaches the subscription, at least once, and each
// copy carries the same outbox-delivery-id attribute, for the receiver to
// de-duplicate on (Pub/Sub has no publisher de-duplication).
// Mutation: putting the dedup key alone in the attribute fails it
// (CheckDelivered wants "<sink>/<dedup key>").
func TestRelayKilledMidPublishDeliversEachMessageAtLeastOnce(t *testing.T) {
	t.Parallel()
	sub := newFake(t).topic(t, "events")
	_, _, extra := brokertest.CrashMidPublish(t, sub.target(), "events", "TestCrashChild")
	t.Logf("%d messages arrived twice, each copy under its delivery id", extra)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

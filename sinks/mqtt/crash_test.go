package mqtt_test

import (
	"testing"

	"github.com/outboxd/outboxd/internal/testkit/brokertest"
)

// A relay SIGKILLed mid-publish leaves messages the broker acknowledged
// whose rows are still in progress; the relay that takes them over
// publishes them again: every message reaches the subscriber, at least
// once, and each copy carries the same delivery id in its envelope, for
// the subscriber to de-duplicate on (MQTT 3.1.1 cannot).
// Mutation: putting the dedup key alone in the envelope's id fails it
// (CheckDelivered wants "<sink>/<dedup key>").
func TestRelayKilledMidPublishDeliversEachMessageAtLeastOnce(t *testing.T) {
	t.Parallel()
	addr := brokerAddr(t)
	sub := subscribe(t, addr)
	_, _, extra := brokertest.CrashMidPublish(t, sub.target("tcp://"+addr, "events", "events"), "events", "TestCrashChild")
	t.Logf("%d messages arrived twice, each copy under its delivery id", extra)
}

// TestCrashChild is the child half of the crash test.
func TestCrashChild(t *testing.T) { brokertest.CrashChild(t) }

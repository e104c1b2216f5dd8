package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/sink"
)

// checkTimeout bounds each Check of CheckChecker; the sinks' connect
// timeouts are shorter.
const checkTimeout = 30 * time.Second

// CheckChecker holds a sink.Checker to its contract: live's Check, against
// a destination that is up, succeeds and delivers nothing (sent counts
// what reached the destination); away's, against an address nothing
// listens on, fails.
func CheckChecker(t *testing.T, live, away sink.Sink, sent func() int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := live.(sink.Checker).Check(ctx); err != nil {
		t.Fatalf("Check against the live destination: %v", err)
	}
	if n := sent(); n != 0 {
		t.Errorf("Check delivered %d messages", n)
	}
	if err := away.(sink.Checker).Check(ctx); err == nil {
		t.Error("Check against an address nothing listens on succeeded")
	}
}

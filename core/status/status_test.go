package status_test

import (
	"slices"
	"testing"

	"github.com/outboxd/outboxd/core/status"
)

// TestBreakerGauge pins the values the outbox.sink.circuit_state gauge
// reports, which dashboards and alerts compare against, and the order the
// relay relies on to report a per-key sink's most open key with max.
//
// Mutation checked: Gauge returning 1 for BreakerProbing (and 2 for
// BreakerOpen) fails it.
func TestBreakerGauge(t *testing.T) {
	t.Parallel()
	for b, want := range map[status.Breaker]int64{status.BreakerClosed: 0, status.BreakerOpen: 1, status.BreakerProbing: 2} {
		if got := b.Gauge(); got != want {
			t.Errorf("%s.Gauge() = %d, want %d", b, got, want)
		}
	}
}

// TestRowsListsEveryStatusOnce checks that Rows, which the API's filter and
// the console's menu check and offer, names each status once, in life-cycle
// order (the order the CLI completes them in).
//
// Mutation checked: leaving status.InProgress out of Rows fails it.
func TestRowsListsEveryStatusOnce(t *testing.T) {
	t.Parallel()
	want := []status.Row{status.Pending, status.InProgress, status.Failed, status.Sent, status.Dead}
	if got := status.Rows(); !slices.Equal(got, want) {
		t.Errorf("Rows() = %v, want %v", got, want)
	}
}

package relay

import (
	"testing"
	"time"
)

// A claim loop claims from the start once per poll interval and, between,
// starts each sink's walk claimBoundMargin before the latest row it
// claimed of the sink (the zero time for a sink it claimed nothing of).
// (Mutation: after never returning nil fails this test at the poll
// interval's end: expired leases would never be found again; after
// without the margin fails it at the bound.)
func TestClaimBoundsClaimFromTheStartOncePerPoll(t *testing.T) {
	t.Parallel()
	const poll = time.Second
	start := time.Now()
	latest := start.Add(-5 * time.Second)
	var b claimBounds
	if got := b.after([]string{"a", "b"}, start, poll); got != nil {
		t.Fatalf("first claim: after = %v, want a claim from the start", got)
	}
	row := func(sink string, at time.Time) *claimedRow {
		r := &claimedRow{availableAt: at}
		r.Sink = sink
		return r
	}
	b.observe([]*claimedRow{row("a", latest.Add(-time.Second)), row("a", latest)})
	got := b.after([]string{"b", "a"}, start.Add(poll/2), poll)
	if want := latest.Add(-claimBoundMargin); len(got) != 2 || !got[0].IsZero() || !got[1].Equal(want) {
		t.Fatalf("within the poll interval: after = %v, want [zero %v]", got, want)
	}
	if got := b.after([]string{"a"}, start.Add(poll), poll); got != nil {
		t.Fatalf("a poll interval later: after = %v, want a claim from the start", got)
	}
	if got := b.after([]string{"b"}, start.Add(poll+1), poll); got != nil {
		t.Fatalf("a sink without a bound: after = %v, want nil", got)
	}
}

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
	if got, full := b.after([]string{"a", "b"}, start, poll); got != nil || !full {
		t.Fatalf("first claim: after = %v, want a claim from the start", got)
	}
	row := func(sink string, at time.Time) *claimedRow {
		r := &claimedRow{availableAt: at}
		r.Sink = sink
		return r
	}
	b.observe([]*claimedRow{row("a", latest.Add(-time.Second)), row("a", latest)})
	got, full := b.after([]string{"b", "a"}, start.Add(poll/2), poll)
	if want := latest.Add(-claimBoundMargin); full || len(got) != 2 || !got[0].IsZero() || !got[1].Equal(want) {
		t.Fatalf("within the poll interval: after = %v, want [zero %v]", got, want)
	}
	if got, full := b.after([]string{"a"}, start.Add(poll), poll); got != nil || !full {
		t.Fatalf("a poll interval later: after = %v, want a claim from the start", got)
	}
	if got, full := b.after([]string{"b"}, start.Add(poll+1), poll); got != nil || full {
		t.Fatalf("a sink without a bound: after = %v, want nil", got)
	}
}

// A slow full claim (a transaction held open leaves it the entries of
// every row delivered since) spaces the next out to claimBoundFullSlowdown
// times its duration, at most claimBoundFullMax; a fast one (under
// claimBoundSlowFull) changes nothing. (Mutations: fullTook doing nothing
// fails this test at the slow claim's second; claimBoundFullMax removed
// fails it at the cap; claimBoundSlowFull ignored fails it after the fast
// claim.)
func TestSlowFullClaimsComeLessOften(t *testing.T) {
	t.Parallel()
	const poll = time.Second
	start := time.Now()
	var b claimBounds
	b.observe([]*claimedRow{{availableAt: start}})
	if _, full := b.after([]string{""}, start, poll); !full {
		t.Fatal("first claim: want a full one")
	}
	b.fullTook(start, claimBoundSlowFull-time.Millisecond)
	if _, full := b.after([]string{""}, start.Add(poll), poll); !full {
		t.Fatal("after a fast full claim: want the next a poll interval later")
	}
	slow := start.Add(poll)
	b.fullTook(slow, 60*time.Millisecond) // 3 s at claimBoundFullSlowdown 50
	for _, at := range []time.Duration{poll, 2 * poll, 3*time.Second - time.Millisecond} {
		if _, full := b.after([]string{""}, slow.Add(at), poll); full {
			t.Fatalf("%s after a 60 ms full claim: full again, want bounded claims until 3s", at)
		}
	}
	if _, full := b.after([]string{""}, slow.Add(3*time.Second), poll); !full {
		t.Fatal("3s after a 60 ms full claim: want a full one")
	}
	slower := slow.Add(3 * time.Second)
	b.fullTook(slower, time.Second)
	if _, full := b.after([]string{""}, slower.Add(claimBoundFullMax-time.Millisecond), poll); full {
		t.Fatal("just before the cap after a 1 s full claim: full again")
	}
	if _, full := b.after([]string{""}, slower.Add(claimBoundFullMax), poll); !full {
		t.Fatalf("%s after a 1 s full claim: want a full one (the cap)", claimBoundFullMax)
	}
}

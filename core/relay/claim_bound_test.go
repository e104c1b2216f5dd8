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
	if got, full, _ := b.after([]string{"a", "b"}, start, poll); got != nil || !full {
		t.Fatalf("first claim: after = %v, want a claim from the start", got)
	}
	row := func(sink string, at time.Time) *claimedRow {
		r := &claimedRow{availableAt: at}
		r.Sink = sink
		return r
	}
	b.observe([]*claimedRow{row("a", latest.Add(-time.Second)), row("a", latest)})
	got, full, _ := b.after([]string{"b", "a"}, start.Add(poll/2), poll)
	if want := latest.Add(-claimBoundMargin); full || len(got) != 2 || !got[0].IsZero() || !got[1].Equal(want) {
		t.Fatalf("within the poll interval: after = %v, want [zero %v]", got, want)
	}
	if got, full, _ := b.after([]string{"a"}, start.Add(poll), poll); got != nil || !full {
		t.Fatalf("a poll interval later: after = %v, want a claim from the start", got)
	}
	if got, full, _ := b.after([]string{"b"}, start.Add(poll+1), poll); got != nil || full {
		t.Fatalf("a sink without a bound: after = %v, want nil", got)
	}
}

// A slow full claim (a transaction held open leaves it the entries of
// every row delivered since) spaces the next out to claimBoundFullSlowdown
// times its duration, at most claimBoundFullMax, and makes it a lookout
// beside bounded claims; a fast one (under claimBoundSlowFull) changes
// nothing, and a fast lookout makes the next a full claim again.
// (Mutations: fullTook doing nothing fails this test at the slow claim's
// second; claimBoundFullMax removed fails it at the cap;
// claimBoundSlowFull ignored fails it after the fast claim; after never
// asking for a lookout fails it at 3s.)
func TestSlowFullClaimsComeLessOftenAndAside(t *testing.T) {
	t.Parallel()
	const poll = time.Second
	start := time.Now()
	var b claimBounds
	b.observe([]*claimedRow{{availableAt: start}})
	if _, full, _ := b.after([]string{""}, start, poll); !full {
		t.Fatal("first claim: want a full one")
	}
	b.fullTook(start, claimBoundSlowFull-time.Millisecond)
	if _, full, _ := b.after([]string{""}, start.Add(poll), poll); !full {
		t.Fatal("after a fast full claim: want the next a poll interval later")
	}
	slow := start.Add(poll)
	b.fullTook(slow, 60*time.Millisecond) // 3 s at claimBoundFullSlowdown 50
	for _, at := range []time.Duration{poll, 2 * poll, 3*time.Second - time.Millisecond} {
		if _, full, look := b.after([]string{""}, slow.Add(at), poll); full || look {
			t.Fatalf("%s after a 60 ms full claim: full %v, lookout %v, want bounded claims until 3s", at, full, look)
		}
	}
	got, full, look := b.after([]string{""}, slow.Add(3*time.Second), poll)
	if want := start.Add(-claimBoundMargin); full || !look || len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("3s after a 60 ms full claim: after %v, full %v, lookout %v; want a lookout beside a claim from %v", got, full, look, want)
	}
	slower := slow.Add(3 * time.Second)
	b.lookedOut(slower, time.Second, nil)
	if _, full, look := b.after([]string{""}, slower.Add(claimBoundFullMax-time.Millisecond), poll); full || look {
		t.Fatal("just before the cap after a 1 s lookout: another full pass")
	}
	if _, _, look := b.after([]string{""}, slower.Add(claimBoundFullMax), poll); !look {
		t.Fatalf("%s after a 1 s lookout: want a lookout (the cap)", claimBoundFullMax)
	}
	fast := slower.Add(claimBoundFullMax)
	b.lookedOut(fast, time.Millisecond, nil)
	if _, full, _ := b.after([]string{""}, fast.Add(poll), poll); !full {
		t.Fatal("a poll interval after a fast lookout: want a full claim")
	}
}

// A row a lookout found passed over starts its sink's next claim at that
// row, once, and only that sink's. (Mutations: after ignoring found fails
// the first check; found kept after use fails the second.)
func TestALookoutsRowStartsTheNextClaimOfItsSink(t *testing.T) {
	t.Parallel()
	const poll = time.Second
	start := time.Now()
	var b claimBounds
	row := func(sink string, at time.Time) *claimedRow {
		r := &claimedRow{availableAt: at}
		r.Sink = sink
		return r
	}
	b.observe([]*claimedRow{row("a", start), row("b", start)})
	b.after([]string{"a", "b"}, start, poll) // the first, full claim
	passed := start.Add(-time.Minute)
	b.lookedOut(start, claimBoundSlowFull, map[string]time.Time{"b": passed})
	bound := start.Add(-claimBoundMargin)
	got, _, _ := b.after([]string{"a", "b"}, start.Add(time.Millisecond), poll)
	if len(got) != 2 || !got[0].Equal(bound) || !got[1].Equal(passed) {
		t.Fatalf("after a lookout found b's row at %v: after = %v, want [%v %v]", passed, got, bound, passed)
	}
	got, _, _ = b.after([]string{"a", "b"}, start.Add(2*time.Millisecond), poll)
	if len(got) != 2 || !got[1].Equal(bound) {
		t.Fatalf("the claim after that one: after = %v, want b from its bound %v again", got, bound)
	}
}

package ratelimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core/internal/ratelimit"
	"github.com/outboxd/outboxd/internal/store"
	"github.com/outboxd/outboxd/internal/testkit/coretest"
)

// A Retry-After pause recorded while the pauses are re-read from the
// database (after a notification, and once per poll interval) is no data
// race, and the sinks stay paused.
// (Mutation, under -race as make test runs core/...: extend reading the
// pauses map outside the limiter's lock, as it did, is reported as a race
// against RefreshPauses replacing the map: CI's core/relay run met it.)
func TestPausesRecordedDuringARefreshAreKept(t *testing.T) {
	b := coretest.Setup(t)
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	l := ratelimit.New(b.Pool, q)
	const sinks, refreshes = 4, 20
	for i := range sinks {
		if err := l.Pause(b.Ctx, fmt.Sprintf("s%d", i), time.Hour, q.Channel); err != nil {
			t.Fatal(err)
		}
	}
	// The same pauses again, known already, so recorded in memory only
	// (no statement orders them against the re-reads), while the pauses
	// are re-read from the database again and again.
	var wg sync.WaitGroup
	refreshed := make(chan struct{})
	wg.Go(func() {
		defer close(refreshed)
		for range refreshes {
			if err := l.RefreshPauses(b.Ctx); err != nil {
				t.Error(err)
			}
		}
	})
	for i := range sinks {
		wg.Go(func() {
			for {
				select {
				case <-refreshed:
					return
				default:
				}
				if err := l.Pause(b.Ctx, fmt.Sprintf("s%d", i), time.Hour, q.Channel); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := len(l.PausedSinks()); got != sinks {
		t.Fatalf("%d sinks paused, want %d", got, sinks)
	}
}

// A reservation takes no permit it cannot start within the hold window,
// for a sink's limit and a key's alike, whatever the rate (one per
// 1,000 s: 0.001/s): asked again and again, the limit grants nothing and
// its next permit stays where the first reservation left it, one interval
// on; keys of other rates in the same statement get theirs. (Mutation:
// KeyLimit.ahead returning 100 h, as reserve_key_permits.sql without its
// ahead bound on 8c4a765: the first reservation grants all three
// permits, the last 2,000 s ahead.)
func TestReservationTakesNoPermitBeyondTheHoldWindow(t *testing.T) {
	b := coretest.Setup(t)
	q, err := store.New(b.Outbox.Schema())
	if err != nil {
		t.Fatal(err)
	}
	l := ratelimit.New(b.Pool, q)
	const hold = time.Second
	slow := ratelimit.KeyLimit{Interval: 1000 * time.Second, Burst: 1}
	fast := ratelimit.KeyLimit{Interval: 100 * time.Millisecond, Burst: 1}
	// Within an interval of each other, the next permit as the first
	// reservation left it and as a later one reports it agree.
	near := func(a, b time.Duration) bool { return (a - b).Abs() < 5*time.Second }
	for round := range 4 {
		want := 0 // the first reservation's permit only
		if round == 0 {
			want = 1
		}
		g, err := l.Reserve(b.Ctx, "sink", slow, 3, hold)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Waits) != want {
			t.Fatalf("sink, reservation %d: %d permits granted, want %d", round, len(g.Waits), want)
		}
		if !near(g.Next, slow.Interval) {
			t.Fatalf("sink, reservation %d: next permit in %s, want about %s", round, g.Next, slow.Interval)
		}
		grants, err := l.ReserveKeys(b.Ctx, "keyed", []string{"a", "b"}, []int{3, 3}, []ratelimit.KeyLimit{slow, fast}, hold)
		if err != nil {
			t.Fatal(err)
		}
		a, bb := grants["a"], grants["b"]
		if len(a.Waits) != want || !near(a.Next, slow.Interval) {
			t.Fatalf("key a, reservation %d: %d permits granted, next in %s; want %d, next in about %s", round, len(a.Waits), a.Next, want, slow.Interval)
		}
		if len(bb.Waits) == 0 {
			t.Fatalf("key b, reservation %d: no permit granted, though its limit allows ten a second", round)
		}
		for _, w := range append(a.Waits, bb.Waits...) {
			if w > hold {
				t.Fatalf("reservation %d granted a permit %s ahead, beyond the hold window %s", round, w, hold)
			}
		}
	}
}

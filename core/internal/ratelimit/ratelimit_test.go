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

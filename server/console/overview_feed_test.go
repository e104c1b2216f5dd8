package console

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/internal/testkit/testrelay"
)

// However many pages and streams watch the overview, it is read at most
// once per refresh interval; the reads stop when the last viewer leaves.
// (Mutations, each failing this test: current() reading every time; poll()
// not stopping without subscribers, or clearing its flag and going on.)
func TestOverviewFeedReadsOncePerRefreshForAllViewers(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	const refresh = 50 * time.Millisecond
	feed := newOverviewFeed(func(context.Context) (overviewView, error) {
		reads.Add(1)
		return overviewView{Taken: "now"}, nil
	}, refresh, slog.New(slog.DiscardHandler))
	defer feed.close()

	var stops []func()
	var streams []<-chan []byte
	for range 20 {
		ch, stop := feed.subscribe()
		streams, stops = append(streams, ch), append(stops, stop)
	}
	started := time.Now()
	for range 5 {
		for _, ch := range streams {
			<-ch // every viewer gets every reading
		}
		for range 10 {
			if _, err := feed.current(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	elapsed := time.Since(started)
	if max := int32(elapsed/refresh) + 2; reads.Load() > max {
		t.Fatalf("%d reads in %s for 20 streams and 50 page views; want at most %d (one per %s)", reads.Load(), elapsed, max, refresh)
	}
	for _, stop := range stops {
		stop()
	}
	// The poller notices the last viewer left at its next tick.
	testrelay.WaitFor(t, 10*time.Second, "the poller to stop after the last viewer left", func() bool {
		feed.mu.Lock()
		defer feed.mu.Unlock()
		return !feed.polling
	})
	before := reads.Load()
	time.Sleep(5 * refresh)
	if reads.Load() != before {
		t.Errorf("%d reads after every viewer left", reads.Load()-before)
	}
}

package core_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
)

// startTimes records when each delivery started.
type startTimes struct {
	mu    sync.Mutex
	times []time.Time
}

func (s *startTimes) add() time.Time {
	now := time.Now()
	s.mu.Lock()
	s.times = append(s.times, now)
	s.mu.Unlock()
	return now
}

func (s *startTimes) sorted() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]time.Time(nil), s.times...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

func TestRateLimitHoldsAcrossRelays(t *testing.T) {
	b := setup(t)
	const n = 60
	limit := core.RateLimit{Rate: 5, Per: time.Second, Burst: 1}
	var starts startTimes
	sink := core.SinkFunc(func(context.Context, *core.Delivery) error { starts.add(); return nil })
	cfg := core.Config{Outbox: b.ob, PollInterval: 50 * time.Millisecond,
		Sinks: []core.SinkConfig{{Name: "limited", Sink: sink, RateLimit: &limit}}}
	for range 3 {
		testrelay.Run(t, testdb.Pool(t, 3), cfg)
	}
	enqueueN(t, b, "limited", n, nil)
	testrelay.WaitFor(t, time.Minute, "all sent", func() bool { return statusCounts(t, b)["sent"] == n })
	times := starts.sorted()
	if len(times) != n {
		t.Fatalf("%d deliveries, want %d", len(times), n)
	}
	if got := testrelay.MaxInWindow(times, time.Second); got > limit.Rate+limit.Burst {
		t.Fatalf("%d deliveries started within one second; the cluster-wide limit allows %d+%d", got, limit.Rate, limit.Burst)
	}
	// Three relays at 5/s must not be throttled to far below 5/s either.
	if took := times[n-1].Sub(times[0]); took > 20*time.Second {
		t.Fatalf("60 deliveries at 5/s took %s", took)
	}
}

func TestRetryAfterPausesTheSinkOnEveryRelay(t *testing.T) {
	b := setup(t)
	const pause = time.Second
	var (
		starts    startTimes
		mu        sync.Mutex
		pausedAt  time.Time
		throttled bool
	)
	sink := core.SinkFunc(func(context.Context, *core.Delivery) error {
		now := starts.add()
		mu.Lock()
		defer mu.Unlock()
		if !throttled {
			throttled, pausedAt = true, now
			return core.RetryAfter(pause, errors.New("429 Too Many Requests"))
		}
		return nil
	})
	other := newRecordingSink()
	cfg := core.Config{Outbox: b.ob, PollInterval: 20 * time.Millisecond,
		Sinks: []core.SinkConfig{{Name: "busy", Sink: sink, MaxInFlight: 1}, {Name: "other", Sink: other}}}
	for range 3 {
		testrelay.Run(t, testdb.Pool(t, 3), cfg)
	}
	enqueueN(t, b, "busy", 30, nil)
	testrelay.WaitFor(t, 30*time.Second, "busy rows sent", func() bool { return statusCounts(t, b)["sent"] == 30 })
	mu.Lock()
	defer mu.Unlock()
	// A delivery another relay had already dispatched when the 429 came
	// back may still go out: the pause reaches it by notification, within
	// dispatchGrace. Nothing may start after that until the pause ends.
	const dispatchGrace = 300 * time.Millisecond
	for _, at := range starts.sorted() {
		if at.After(pausedAt.Add(dispatchGrace)) && at.Before(pausedAt.Add(pause-50*time.Millisecond)) {
			t.Fatalf("a delivery started %s after the 429, inside its %s Retry-After", at.Sub(pausedAt), pause)
		}
	}
	// Other sinks keep flowing while one is paused.
	if _, err := b.ob.Enqueue(b.ctx, b.pool, core.Message{Sink: "other", DedupKey: "x", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	testrelay.WaitFor(t, 5*time.Second, "the other sink's delivery", func() bool { return len(other.snapshot()) == 1 })
}

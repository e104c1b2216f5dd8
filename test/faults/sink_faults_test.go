package faults_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/internal/testdb"
	"github.com/outboxd/outboxd/internal/testrelay"
)

// faultLease is the lease of the sink fault tests: short, so that
// timeouts and retries happen within seconds.
const faultLease = 2 * time.Second

// TestHangingSinkTimesOutInsideLease: a sink that never answers on its own
// (it returns only when its context ends) is cut off inside the lease, the
// row is retried, and a healthy sink keeps flowing. The hanging sink has a
// max_in_flight of its own, so it claims in a loop of its own.
func TestHangingSinkTimesOutInsideLease(t *testing.T) {
	t.Parallel()
	testHangingSink(t, true, 2, 3, faultLease)
}

// TestSinkIgnoringContextDoesNotStallOthers: a sink that ignores its
// context and blocks must not take the relay's delivery slots with it: the
// slot is given back at the delivery deadline, the row is re-claimed when
// its lease expires, and the healthy sink keeps flowing.
func TestSinkIgnoringContextDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	testHangingSink(t, false, 2, 3, faultLease)
}

// TestHangingSinkInSharedLoopSlowsButDoesNotStall: without a max_in_flight
// of its own, a hanging sink shares the relay's claim loop and slots with
// the healthy one. The healthy sink is slowed (its rows queue behind the
// hanging ones, and rows claimed ahead lose their lease budget waiting for a
// slot and are handed back) but not stalled: everything is sent within a
// bounded number of leases. Measured: 20 rows take about 5 leases.
func TestHangingSinkInSharedLoopDoesNotStallOthers(t *testing.T) {
	t.Parallel()
	testHangingSink(t, false, 0, 2, faultLease)
}

// testHangingSink runs a hanging sink (honouring its context or not, with
// maxInFlight, 0 for the relay's concurrency) next to a healthy one and
// requires each of batches batches of healthy messages to be sent within
// flowWithin.
func testHangingSink(t *testing.T, honoursContext bool, maxInFlight, batches int, flowWithin time.Duration) {
	pool, ob := testdb.New(t)
	release := make(chan struct{})
	var calls atomic.Int64
	var overran atomic.Int64 // deliveries whose deadline lay past the lease
	hang := core.SinkFunc(func(ctx context.Context, d *core.Delivery) error {
		calls.Add(1)
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > faultLease {
			overran.Add(1)
		}
		if honoursContext {
			<-ctx.Done()
			return ctx.Err()
		}
		<-release
		return nil
	})
	good := newCounter()
	const concurrency = 4
	testrelay.Run(t, pool, core.Config{
		Outbox: ob, Lease: faultLease, PollInterval: 100 * time.Millisecond, Concurrency: concurrency,
		Sinks: []core.SinkConfig{
			{Name: "hang", Sink: hang, MaxAttempts: 100, MaxInFlight: maxInFlight,
				Backoff: core.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}},
			{Name: "good", Sink: good},
		},
	})
	// Registered after runRelay so that it runs first: the relay's drain
	// waits for deliveries still inside a sink.
	t.Cleanup(func() { close(release) })
	// More hanging messages than the relay has slots.
	enqueue(t, pool, ob, "hang", "h", 2*concurrency)
	testrelay.WaitFor(t, 10*time.Second, "the hanging sink is called", func() bool { return calls.Load() >= 1 })
	for b := range batches {
		enqueue(t, pool, ob, "good", "g"+string(rune('a'+b)), 20)
		testrelay.WaitFor(t, flowWithin, "the healthy sink's messages are sent", func() bool {
			return testdb.StatusCounts(t, pool, ob, "good")["sent"] == 20*(b+1)
		})
	}
	testrelay.WaitFor(t, 10*faultLease, "hanging rows are retried", func() bool {
		var retried int
		// A sink that honours its context returns the deadline error; one
		// that ignores it leaves its row to lease expiry.
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM `+ob.Schema()+
			`.messages WHERE sink = 'hang' AND attempts >= 2 AND (NOT $1 OR last_error LIKE '%deadline%')`,
			honoursContext).Scan(&retried)
		return err == nil && retried > 0
	})
	if n := overran.Load(); n > 0 {
		t.Errorf("%d deliveries were given a deadline past the lease", n)
	}
}

// TestPanickingSinkIsRecovered: a sink that panics on one message is
// recovered, the panic recorded as a failed attempt (and, after the last
// attempt, a dead letter), and the relay keeps delivering other messages.
func TestPanickingSinkIsRecovered(t *testing.T) {
	t.Parallel()
	pool, ob := testdb.New(t)
	good := newCounter()
	boom := core.SinkFunc(func(_ context.Context, d *core.Delivery) error {
		if strings.HasPrefix(d.DedupKey, "boom") {
			panic("sink bug on " + d.DedupKey)
		}
		return good.Deliver(context.Background(), d)
	})
	testrelay.Run(t, pool, core.Config{
		Outbox: ob, Lease: faultLease, PollInterval: 100 * time.Millisecond,
		Sinks: []core.SinkConfig{{Name: "s", Sink: boom, MaxAttempts: 3, Backoff: core.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond}}},
	})
	enqueue(t, pool, ob, "s", "boom", 1)
	enqueue(t, pool, ob, "s", "before", 10)
	testrelay.WaitFor(t, 10*time.Second, "the panicking message is dead after 3 attempts", func() bool {
		return testdb.StatusCounts(t, pool, ob, "s")["dead"] == 1
	})
	// The relay survived: messages enqueued after the panics are delivered.
	enqueue(t, pool, ob, "s", "after", 10)
	testrelay.WaitFor(t, 10*time.Second, "messages after the panic are sent", func() bool {
		return testdb.StatusCounts(t, pool, ob, "s")["sent"] == 20
	})
	rows, err := pool.Query(t.Context(), `SELECT f.attempt, f.error FROM `+ob.Schema()+`.failed_attempts f JOIN `+
		ob.Schema()+`.messages m ON m.id = f.message_id WHERE m.dedup_key = 'boom-0' ORDER BY f.attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var attempt int
		var msg string
		if err := rows.Scan(&attempt, &msg); err != nil {
			t.Fatal(err)
		}
		n++
		if !strings.Contains(msg, "panicked") || !strings.Contains(msg, "sink bug on boom-0") {
			t.Errorf("attempt %d recorded %q, want the panic", attempt, msg)
		}
	}
	if n != 3 {
		t.Errorf("%d failed attempts recorded for the panicking message, want 3", n)
	}
}

package faults_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Sizes of the large-payload memory test.
const (
	// largeRows rows of payloads at core's limit: 250 MiB in all, what one
	// claim of the default batch would hold without a byte bound.
	largeRows = 1000
	// largePayloadHeapBudget bounds the growth of the live heap while the
	// relay delivers them with the default relay.max_claim_bytes (16 MiB,
	// 64 rows a claim). Measured: 16.0-17.5 MiB (heap in use up to
	// 35 MiB); without the byte bound, 162 MiB.
	largePayloadHeapBudget = 2 * relay.DefaultMaxClaimBytes
	// deliverLargeWithin bounds how long the relay may take to deliver
	// them (about a second unloaded).
	deliverLargeWithin = time.Minute
)

// TestLargePayloadsBoundedMemory: a relay facing rows whose payloads are at
// the 256 KiB limit claims fewer of them (relay.max_claim_bytes, sized from
// the payloads of its last claim and, for the first, from the limit), so
// its live heap grows by at most largePayloadHeapBudget while it delivers
// 250 MiB of payloads, instead of claiming them by the thousand. The sink
// only counts, so the heap is the relay's.
// (Mutation: claimSize.rows returning batch, the row limit only, fails
// this test with a growth of 162 MiB.)
func TestLargePayloadsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 250 MiB of payloads")
	}
	// Not parallel: the heap is measured in this process.
	pool, ob := testdb.New(t)
	ctx := t.Context()
	// jsonb prints {"p": "xx...x"}: the payload is exactly the limit.
	if _, err := pool.Exec(ctx, `INSERT INTO `+ob.Schema()+`.messages (sink, dedup_key, payload)
		SELECT 'count', 'k' || g, jsonb_build_object('p', repeat('x', $2::int - length('{"p": ""}')))
		FROM generate_series(1, $1::int) g`, largeRows, outboxd.DefaultMaxPayloadBytes); err != nil {
		t.Fatal(err)
	}
	var deliveries atomic.Int64
	done, allDelivered := context.WithCancel(context.Background())
	defer allDelivered()
	counter := sink.Func(func(_ context.Context, d *sink.Delivery) error {
		if len(d.Payload) != outboxd.DefaultMaxPayloadBytes {
			t.Errorf("payload of %d bytes, want %d", len(d.Payload), outboxd.DefaultMaxPayloadBytes)
		}
		if deliveries.Add(1) == largeRows {
			allDelivered()
		}
		return nil
	})
	runtime.GC()
	base := readHeap()
	start := time.Now()
	peak := measurePeakHeap(t, deliverLargeWithin, func(ctx context.Context) {
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { <-done.Done(); stop() }()
		runRelayFor(ctx, t, pool, ob.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "count", Sink: counter}}})
	})
	t.Logf("delivered %d of %d payloads of %d bytes in %s; live heap %.1f MiB before, %.1f MiB peak; heap in use %.1f MiB before, %.1f MiB peak",
		deliveries.Load(), largeRows, outboxd.DefaultMaxPayloadBytes, time.Since(start).Round(time.Millisecond),
		mib(base.live), mib(peak.live), mib(base.inUse), mib(peak.inUse))
	if n := deliveries.Load(); n < largeRows {
		t.Errorf("only %d of %d deliveries within %s", n, largeRows, deliverLargeWithin)
	}
	if grew := int64(peak.live) - int64(base.live); grew > largePayloadHeapBudget {
		t.Errorf("live heap grew by %.1f MiB delivering %d payloads of %d bytes, budget %.1f MiB",
			mib(uint64(grew)), largeRows, outboxd.DefaultMaxPayloadBytes, mib(largePayloadHeapBudget))
	}
}

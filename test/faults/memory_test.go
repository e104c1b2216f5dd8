package faults_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/test/internal/pgcluster"
)

// Sizes of the memory test.
const (
	pendingRows = 1_000_000
	// heapBudget bounds the relay's heap growth while it claims from a
	// million pending rows: a claim holds at most BatchSize rows, whatever
	// the backlog.
	heapBudget = 64 << 20
	// claimFor is how long the relay works through the backlog while the
	// heap is sampled.
	claimFor = 5 * time.Second
)

// TestMillionPendingRowsBoundedMemory: a relay facing 1,000,000 pending
// rows (inserted with generate_series into a cluster of the test's own)
// keeps its Go heap within heapBudget while it claims and delivers.
func TestMillionPendingRowsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million rows")
	}
	// Not parallel: the heap is measured in this process.
	pg := pgcluster.Start(t)
	ctx := t.Context()
	pool := pg.Pool(2)
	ob, err := core.New("mem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO mem.messages (sink, dedup_key, payload)
		SELECT 'count', 'k' || lpad(g::text, 7, '0'), jsonb_build_object('n', g)
		FROM generate_series(1, $1::int) g`, pendingRows); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE mem.messages`); err != nil {
		t.Fatal(err)
	}
	t.Logf("inserted %d rows in %s", pendingRows, time.Since(start).Round(time.Millisecond))

	sink := newCounter()
	relayPool := pg.Pool(4)
	base := heapInuse()
	peak := measurePeakHeap(t, func(ctx context.Context) {
		runRelayFor(ctx, t, relayPool, core.Config{Outbox: ob, Sinks: []core.SinkConfig{{Name: "count", Sink: sink}}})
	})
	delivered := sink.total.Load()
	t.Logf("delivered %d of %d in %s; heap in use: %d MiB before, %d MiB peak", delivered, pendingRows, claimFor, base>>20, peak>>20)
	if delivered < 1000 {
		t.Errorf("only %d deliveries in %s: the relay is not working through the backlog", delivered, claimFor)
	}
	if grew := int64(peak) - int64(base); grew > heapBudget {
		t.Errorf("heap grew by %d MiB facing %d pending rows, budget %d MiB", grew>>20, pendingRows, heapBudget>>20)
	}
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// measurePeakHeap runs work for claimFor, sampling the heap every 50ms,
// and returns the highest sample.
func measurePeakHeap(t *testing.T, work func(ctx context.Context)) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), claimFor)
	defer cancel()
	done := make(chan struct{})
	go func() { work(ctx); close(done) }()
	var peak uint64
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return peak
		case <-tick.C:
			peak = max(peak, heapInuse())
		}
	}
}

// runRelayFor runs a relay until ctx ends.
func runRelayFor(ctx context.Context, t *testing.T, pool *pgxpool.Pool, cfg core.Config) {
	relay, err := core.NewRelay(pool, cfg)
	if err != nil {
		t.Error(err)
		return
	}
	if err := relay.Run(ctx); err != nil {
		t.Error(err)
	}
}

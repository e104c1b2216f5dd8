package faults_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/relay"
	"github.com/outboxd/outboxd/core/sink"
	"github.com/outboxd/outboxd/internal/testkit/pgcluster"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// Sizes of the memory test.
const (
	pendingRows = 1_000_000
	// liveHeapBudget bounds the growth of the relay's live heap (what the
	// last garbage collection found reachable) while it claims from a
	// million pending rows: what the relay holds is bounded by the batch,
	// whatever the backlog. Rows held at once are at most the batches
	// claimed ahead (claimAheadBatches), the deliveries running, a batch of
	// outcomes queued for the completer and one being written; each claim's
	// rows share one array (about 0.6 KiB a row) that its last row keeps
	// alive. Measured with the default batch of 1,000: 4.7-5.8 MiB on a
	// quiet machine and 6.4 MiB in CI under load, where outcomes wait
	// longer for their write and keep more arrays alive (a budget of
	// 6 MiB failed there); the same after 960,000 deliveries as after
	// 350,000, so nothing is kept per delivered row. A batch of 10,000
	// grew 38 MiB.
	liveHeapBudget = 8 << 20
	// claimFor is how long the relay works through the backlog while the
	// heap is sampled.
	claimFor = 5 * time.Second
	// sampleEvery is how often the heap is sampled.
	sampleEvery = 50 * time.Millisecond
)

// TestMillionPendingRowsBoundedMemory: a relay facing 1,000,000 pending
// rows (inserted with generate_series into a cluster of the test's own)
// keeps its live Go heap within liveHeapBudget of where it started while it
// claims and delivers. The sink only counts, so the heap is the relay's.
// (Mutation: DefaultBatchSize = 10000, ten times the default, fails this
// test with a growth of 38 MiB.)
func TestMillionPendingRowsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million rows")
	}
	// Not parallel: the heap is measured in this process.
	pg := pgcluster.Start(t)
	ctx := t.Context()
	pool := pg.Pool(2)
	ob := testdb.Open(t, "mem")
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

	var deliveries atomic.Int64
	counter := sink.Func(func(context.Context, *sink.Delivery) error { deliveries.Add(1); return nil })
	relayPool := pg.Pool(4)
	runtime.GC()
	base := readHeap()
	peak := measurePeakHeap(t, claimFor, func(ctx context.Context) {
		runRelayFor(ctx, t, relayPool, ob.Schema(), relay.Config{Sinks: []relay.SinkConfig{{Name: "count", Sink: counter}}})
	})
	delivered := deliveries.Load()
	t.Logf("delivered %d of %d in %s; live heap %.1f MiB before, %.1f MiB peak; heap in use %.1f MiB before, %.1f MiB peak",
		delivered, pendingRows, claimFor, mib(base.live), mib(peak.live), mib(base.inUse), mib(peak.inUse))
	if delivered < 1000 {
		t.Errorf("only %d deliveries in %s: the relay is not working through the backlog", delivered, claimFor)
	}
	if grew := int64(peak.live) - int64(base.live); grew > liveHeapBudget {
		t.Errorf("live heap grew by %.1f MiB facing %d pending rows, budget %.1f MiB", mib(uint64(grew)), pendingRows, mib(liveHeapBudget))
	}
}

// heap is one sample of the Go heap.
type heap struct {
	live  uint64 // reachable at the last garbage collection
	inUse uint64 // in spans holding objects, garbage included
}

func readHeap() heap {
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(samples)
	return heap{live: samples[0].Value.Uint64(), inUse: samples[1].Value.Uint64()}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// measurePeakHeap runs work for at most d, sampling the heap every
// sampleEvery, and returns the highest samples.
func measurePeakHeap(t *testing.T, d time.Duration, work func(ctx context.Context)) heap {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	done := make(chan struct{})
	go func() { work(ctx); close(done) }()
	var peak heap
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return peak
		case <-tick.C:
			h := readHeap()
			peak.live, peak.inUse = max(peak.live, h.live), max(peak.inUse, h.inUse)
		}
	}
}

// runRelayFor runs a relay of the outbox in schema on pool until ctx ends.
// It reports errors with t.Error: it runs in a goroutine of its own.
func runRelayFor(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string, cfg relay.Config) {
	ob, err := outboxd.New(pool, outboxd.Options{Schema: schema})
	if err != nil {
		t.Error(err)
		return
	}
	relay, err := ob.NewRelay(cfg)
	if err != nil {
		t.Error(err)
		return
	}
	if err := relay.Run(ctx); err != nil {
		t.Error(err)
	}
}

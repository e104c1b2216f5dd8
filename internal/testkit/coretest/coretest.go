// Package coretest is what the engine's tests share, so the tests of the
// root package, core/relay and core/operator keep one copy of each helper:
// a sink that records its deliveries (RecordingSink), a test's bundle of a
// pool, an outbox in a schema of its own and a context (Setup), the rows per
// status and a batch enqueue of n messages (Bundle.StatusCounts,
// Bundle.EnqueueN), the plan PostgreSQL chooses for a query (Bundle.Explain),
// and in-memory OpenTelemetry tracer and meter providers with metric lookups
// (NewTelemetry, SumByAttrs, FindMetric, Labels).
//
// It builds on internal/testkit/testdb for schemas and pools (a Bundle's
// outbox is made through the front door on its pool); relays are run with
// internal/testkit/testrelay.
package coretest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/internal/testkit/testdb"
)

// setupTimeout bounds each test's context.
const setupTimeout = 2 * time.Minute

// enqueueChunk is how many messages EnqueueN enqueues in one batch.
const enqueueChunk = 1000

// Bundle is what Setup returns: an outbox in a schema of its own, a pool
// on it, and a context that ends with the test.
type Bundle struct {
	Pool   *pgxpool.Pool
	Outbox *testdb.Outbox
	Ctx    context.Context
}

// Setup marks the test parallel and returns a fresh, migrated outbox (see
// testdb.New) with a pool and a context of two minutes, cancelled when the
// test ends.
func Setup(t *testing.T) Bundle {
	t.Helper()
	t.Parallel()
	pool, ob := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	t.Cleanup(cancel)
	return Bundle{Pool: pool, Outbox: ob, Ctx: ctx}
}

// StatusCounts returns the number of rows per status, of every sink.
func (b Bundle) StatusCounts(t testing.TB) map[string]int {
	t.Helper()
	return testdb.StatusCounts(t, b.Pool, b.Outbox, "")
}

// EnqueueN enqueues n messages for sink, in batches, and returns their ids
// in order. Message i has dedup key "k-<i>" and payload {"n": i}; mutate,
// if not nil, changes each message before it is enqueued.
func (b Bundle) EnqueueN(t testing.TB, sink string, n int, mutate func(i int, m *outboxd.Message)) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for start := 0; start < n; start += enqueueChunk {
		var msgs []outboxd.Message
		for i := start; i < min(n, start+enqueueChunk); i++ {
			m := outboxd.Message{Sink: sink, DedupKey: fmt.Sprintf("k-%d", i), Payload: map[string]int{"n": i}}
			if mutate != nil {
				mutate(i, &m)
			}
			msgs = append(msgs, m)
		}
		res, err := b.Outbox.EnqueueBatch(b.Ctx, b.Pool, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

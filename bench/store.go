package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/sink"
)

// store is what the parent does to one engine's database: empty it, enqueue
// the way that engine's users do, seed history and look at the table.
type store interface {
	pool() *pgxpool.Pool
	reset(ctx context.Context) error
	// enqueueOne enqueues one message in tx and returns its id.
	enqueueOne(ctx context.Context, tx pgx.Tx) (int64, error)
	// enqueueBatch enqueues n messages in tx with the engine's batch API.
	enqueueBatch(ctx context.Context, tx pgx.Tx, n int) error
	// enqueueBatchIDs enqueues n messages in tx with the engine's batch
	// API that reports what it inserted, and returns their ids.
	enqueueBatchIDs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error)
	// seedWaiting adds n waiting rows (jobs) of sink (River: queue), made
	// an hour ago, so that they come before fresh rows in claim order.
	seedWaiting(ctx context.Context, sink string, n int) error
	// pauseSink pauses sink (River: queue) until resumed.
	pauseSink(ctx context.Context, sink string) error
	// countBacklog does what the engine's running relays would have done
	// while a backlog seeded at once built up: outboxd's leading relay
	// counts it into its stats snapshot; River keeps no counts.
	countBacklog(ctx context.Context) error
	// hotTables names the tables a relay's claims and finishes work on.
	hotTables(ctx context.Context) ([]string, error)
	// seedHistory adds n delivered rows (sent / completed) and vacuums.
	seedHistory(ctx context.Context, n int) error
	// unfinished counts rows not yet delivered and recorded as such.
	unfinished(ctx context.Context) (int64, error)
	// table names the engine's queue table.
	table() string
}

// seq numbers every message the benchmark makes, for unique dedup keys and
// payloads.
var seq atomic.Int64

// Sinks (River: queues) besides noopSink: pausedSinkName is configured and
// paused; throttledSinkName is configured with throttledRate, so it has a
// permit at most once per hour (River has no rate limit: its queue of
// that name is worked by no client, as ghostSinkName's); ghostSinkName is
// configured on no relay (a sink of another deployment, or one removed
// from the configuration).
const (
	pausedSinkName    = "paused"
	throttledSinkName = "throttled"
	ghostSinkName     = "ghost"
)

// throttledRate is throttledSinkName's rate limit: one delivery an hour,
// a sink whose backlog waits for permits throughout a measurement.
var throttledRate = sink.RateLimit{Rate: 1, Per: time.Hour, Burst: 1}

// padding is the filler a payload of about size bytes carries besides its
// number ("" for the default, smallest payload).
func padding(size int) string {
	const overhead = len(`{"n":1000000,"pad":""}`)
	return strings.Repeat("x", max(0, size-overhead))
}

// inTx runs fn in a transaction of its own on s's pool.
func inTx(ctx context.Context, s store, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool(), fn)
}

// enqueueBacklog enqueues n messages in transactions of enqueueChunk.
func enqueueBacklog(ctx context.Context, s store, n int) error {
	for done := 0; done < n; done += enqueueChunk {
		k := min(enqueueChunk, n-done)
		if err := inTx(ctx, s, func(tx pgx.Tx) error { return s.enqueueBatch(ctx, tx, k) }); err != nil {
			return fmt.Errorf("enqueue backlog: %w", err)
		}
	}
	_, err := s.pool().Exec(ctx, "ANALYZE "+s.table())
	return err
}

// tableBytes is the size of the engine's queue table with its indexes.
func tableBytes(ctx context.Context, s store) (int64, error) {
	var n int64
	err := s.pool().QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass)`, s.table()).Scan(&n)
	return n, err
}

// tableRows counts the rows of the engine's queue table.
func tableRows(ctx context.Context, s store) (int64, error) {
	var n int64
	err := s.pool().QueryRow(ctx, "SELECT count(*) FROM "+s.table()).Scan(&n)
	return n, err
}

// tupleCounts sums n_live_tup and n_dead_tup over tables, as the
// statistics collector last saw them.
func tupleCounts(ctx context.Context, s store, tables []string) (live, dead int64, err error) {
	err = s.pool().QueryRow(ctx, `SELECT coalesce(sum(n_live_tup), 0)::bigint, coalesce(sum(n_dead_tup), 0)::bigint
		FROM pg_stat_user_tables WHERE (schemaname || '.' || relname) = ANY($1) OR relname = ANY($1)`, tables).Scan(&live, &dead)
	return live, dead, err
}

// relationSizes is the heap (with TOAST) and the index bytes of tables.
func relationSizes(ctx context.Context, s store, tables []string) (heap, index int64, err error) {
	err = s.pool().QueryRow(ctx, `SELECT coalesce(sum(pg_table_size(t::regclass)), 0)::bigint,
		coalesce(sum(pg_indexes_size(t::regclass)), 0)::bigint FROM unnest($1::text[]) t`, tables).Scan(&heap, &index)
	return heap, index, err
}

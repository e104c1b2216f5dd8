package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The bare loop is the limit row of the burn-down: a claim/finish loop on
// outboxd's own table and indexes that does nothing else. No sink, no
// goroutine per message, no batching of outcomes across claims: claim up to
// bareBatch rows, record them delivered, move them to history, commit as
// outboxd's relay does (a claim waits for the WAL flush, a terminal write
// does not), repeat. What
// it reaches is what the table's design allows; outboxd's share of it is
// what the relay costs on top. A better table raises both.
const bareBatch = 1000

// bareIdlePoll is how long the loop waits after finding nothing to claim:
// once the backlog is gone it idles until the parent stops it.
const bareIdlePoll = 10 * time.Millisecond

// bareClaim and bareFinish are the loop's two statements: the essentials
// of outboxd's claim (one sink's open rows in order through the sink-led
// open index, locked without waiting, leased) and of its terminal write
// (the row leaves the hot table for the current history slot, its key
// stays), without ordering keys, pauses, breakers, expired leases or
// failed attempts. They follow the table's design: when a migration
// changes how rows are found or kept, these change with it.
const (
	bareClaim = `
UPDATE outbox.messages m
SET status = 'in_progress', attempts = m.attempts + 1, lease_token = $2,
    lease_expires_at = now() + interval '30 seconds', updated_at = now()
WHERE m.id IN (
    SELECT id FROM outbox.messages
    WHERE sink = $3 AND NOT queued_behind AND phase = 'open' AND available_at <= now() AND status <> 'in_progress'
    ORDER BY available_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED)
  AND (SELECT set_config('synchronous_commit', 'on', true) = 'on')
RETURNING m.id`
	bareFinish = `
WITH gone AS (
    DELETE FROM outbox.messages m WHERE m.id = ANY($1)
    RETURNING m.id, m.sink, m.dedup_key, m.payload, m.headers, m.attempts, m.max_attempts, m.available_at, m.created_at
), history AS (
    INSERT INTO outbox.messages_history (slot, id, sink, dedup_key, payload, headers, attempts, max_attempts,
        deferrals, available_at, created_at, updated_at, sent_at)
    SELECT (SELECT s.slot FROM outbox.history_slots s WHERE s.state = 'current'), g.id, g.sink, g.dedup_key, g.payload,
           g.headers, g.attempts, g.max_attempts, 0, g.available_at, g.created_at, now(), now()
    FROM gone g
)
INSERT INTO outbox.message_keys (sink, dedup_key, id)
SELECT g.sink, g.dedup_key, g.id FROM gone g
ON CONFLICT (sink, dedup_key) DO NOTHING`
)

// bareLoop claims and finishes until ctx ends; it returns nil then. Like
// the relay, it claims the next batch while the last one's terminal write
// runs (two connections): a loop that waited for each write would measure
// its own round trips, not the table.
func bareLoop(ctx context.Context, pool *pgxpool.Pool, rec *recorder) error {
	batches := make(chan []int64, 1)
	finished := make(chan error, 1)
	go func() {
		// Finished even when told to stop meanwhile: rows left in
		// progress would fail the run's verification.
		for ids := range batches {
			if _, err := pool.Exec(context.WithoutCancel(ctx), bareFinish, ids); err != nil {
				finished <- fmt.Errorf("bare loop: %w", err)
				for range batches {
				}
				return
			}
		}
		finished <- nil
	}()
	err := bareClaims(ctx, pool, rec, batches)
	close(batches)
	if ferr := <-finished; err == nil {
		err = ferr
	}
	return err
}

// bareClaims claims batches and hands them to the finisher.
func bareClaims(ctx context.Context, pool *pgxpool.Pool, rec *recorder, batches chan<- []int64) error {
	for ctx.Err() == nil {
		rows, err := pool.Query(ctx, bareClaim, bareBatch, uuid.New(), noopSink)
		if err != nil {
			return bareErr(ctx, err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return bareErr(ctx, err)
		}
		if len(ids) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(bareIdlePoll):
			}
			continue
		}
		for _, id := range ids {
			rec.add(id)
		}
		batches <- ids
	}
	return nil
}

func bareErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("bare loop: %w", err)
}

package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverStore enqueues through an insert-only River client, the way a River
// user's producers do, configured with its system's FetchCooldown (which
// also paces the client's insert notifications).
type riverStore struct {
	p      *pgxpool.Pool
	client *river.Client[pgx.Tx]
	pad    string // payload filler (see padding)
}

func newRiverStore(p *pgxpool.Pool, sys system, pad string) (riverStore, error) {
	c, err := river.NewClient(riverpgxv5.New(p), &river.Config{Logger: quietLogger(), FetchCooldown: sys.fetch})
	if err != nil {
		return riverStore{}, fmt.Errorf("river insert client: %w", err)
	}
	return riverStore{p: p, client: c, pad: pad}, nil
}

func (s riverStore) pool() *pgxpool.Pool { return s.p }
func (s riverStore) table() string       { return "river_job" }

func (s riverStore) reset(ctx context.Context) error {
	_, err := s.p.Exec(ctx, `TRUNCATE river_job RESTART IDENTITY`)
	return err
}

func (s riverStore) nextArgs() noopArgs { return noopArgs{N: int(seq.Add(1)), Pad: s.pad} }

func (s riverStore) enqueueOne(ctx context.Context, tx pgx.Tx) (int64, error) {
	res, err := s.client.InsertTx(ctx, tx, s.nextArgs(), nil)
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

// enqueueBatch uses InsertManyFastTx, River's fastest batch insert (COPY).
func (s riverStore) enqueueBatch(ctx context.Context, tx pgx.Tx, n int) error {
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: s.nextArgs()}
	}
	_, err := s.client.InsertManyFastTx(ctx, tx, params)
	return err
}

// enqueueBatchIDs uses InsertManyTx, River's batch insert that returns the
// jobs it inserted.
func (s riverStore) enqueueBatchIDs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error) {
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: s.nextArgs()}
	}
	res, err := s.client.InsertManyTx(ctx, tx, params)
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids, err
}

func (s riverStore) seedWaiting(ctx context.Context, queue string, n int) error {
	if _, err := s.p.Exec(ctx, `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, created_at, scheduled_at)
		SELECT jsonb_build_object('n', g), $1, 25, $2, 'available', now() - interval '1 hour', now() - interval '1 hour'
		FROM generate_series(1, $3::int) g`, noopSink, queue, n); err != nil {
		return fmt.Errorf("seed %d waiting jobs of queue %s: %w", n, queue, err)
	}
	return nil
}

// pauseSink pauses a queue the way QueuePause does, before any client
// has created the queue's row (QueuePause needs the row).
func (riverStore) countBacklog(context.Context) error { return nil }

func (s riverStore) pauseSink(ctx context.Context, queue string) error {
	_, err := s.p.Exec(ctx, `
		INSERT INTO river_queue (name, created_at, metadata, paused_at, updated_at)
		VALUES ($1, now(), '{}', now(), now())
		ON CONFLICT (name) DO UPDATE SET paused_at = now(), updated_at = now()`, queue)
	return err
}

func (s riverStore) hotTables(context.Context) ([]string, error) { return []string{"river_job"}, nil }

func (s riverStore) seedHistory(ctx context.Context, n int) error {
	if _, err := s.p.Exec(ctx, `
		INSERT INTO river_job (args, kind, max_attempts, queue, state, attempt, attempted_at, finalized_at)
		SELECT jsonb_build_object('n', g), $1, 25, 'default', 'completed', 1, now(), now()
		FROM generate_series(1, $2::int) g`, noopSink, n); err != nil {
		return fmt.Errorf("seed river history: %w", err)
	}
	_, err := s.p.Exec(ctx, `VACUUM ANALYZE river_job`)
	return err
}

func (s riverStore) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := s.p.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state <> 'completed'`).Scan(&n)
	return n, err
}

// migrateRiver creates River's tables in a fresh database.
func migrateRiver(ctx context.Context, p *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(p), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd"
	"github.com/outboxd/outboxd/core/audit"
	"github.com/outboxd/outboxd/core/operator"
)

// outboxdStore enqueues through outboxd's public API into the default
// outbox schema of its own database.
type outboxdStore struct {
	p   *pgxpool.Pool
	pad string // payload filler (see padding)
}

func (s outboxdStore) pool() *pgxpool.Pool { return s.p }
func (s outboxdStore) table() string       { return "outbox.messages" }

func (s outboxdStore) reset(ctx context.Context) error {
	// The dedup keys and the delivered history (migration 013) go too: a
	// key left from an earlier run would make its message a duplicate.
	_, err := s.p.Exec(ctx, `TRUNCATE outbox.messages, outbox.message_keys, outbox.messages_history, outbox.failed_attempts, outbox.sink_limits RESTART IDENTITY`)
	return err
}

func (s outboxdStore) nextMessage() outboxd.Message {
	n := seq.Add(1)
	payload := fmt.Sprintf(`{"n":%d}`, n)
	if s.pad != "" {
		payload = fmt.Sprintf(`{"n":%d,"pad":%q}`, n, s.pad)
	}
	return outboxd.Message{Sink: noopSink, DedupKey: fmt.Sprintf("k%d", n), Payload: json.RawMessage(payload)}
}

func (s outboxdStore) enqueueOne(ctx context.Context, tx pgx.Tx) (int64, error) {
	res, err := outboxd.Enqueue(ctx, tx, s.nextMessage())
	return res.ID, err
}

func (s outboxdStore) enqueueBatch(ctx context.Context, tx pgx.Tx, n int) error {
	_, err := s.enqueueBatchIDs(ctx, tx, n)
	return err
}

func (s outboxdStore) enqueueBatchIDs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error) {
	msgs := make([]outboxd.Message, n)
	for i := range msgs {
		msgs[i] = s.nextMessage()
	}
	res, err := outboxd.EnqueueBatch(ctx, tx, msgs)
	ids := make([]int64, len(res))
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids, err
}

func (s outboxdStore) seedWaiting(ctx context.Context, sink string, n int) error {
	if _, err := s.p.Exec(ctx, `
		INSERT INTO outbox.messages (sink, dedup_key, payload, available_at, created_at)
		SELECT $1, 'w' || g, jsonb_build_object('n', g), now() - interval '1 hour', now() - interval '1 hour'
		FROM generate_series(1, $2::int) g`, sink, n); err != nil {
		return fmt.Errorf("seed %d waiting rows of %s: %w", n, sink, err)
	}
	return nil
}

// operator is the operator of outboxd's default schema, on s's pool.
func (s outboxdStore) operator() (*operator.Operator, error) {
	ob, err := outboxd.New(s.p, outboxd.Options{})
	if err != nil {
		return nil, err
	}
	return ob.Operator(), nil
}

func (s outboxdStore) countBacklog(ctx context.Context) error {
	op, err := s.operator()
	if err != nil {
		return err
	}
	return op.RefreshStatsSnapshot(ctx, s.p, "bench")
}

func (s outboxdStore) pauseSink(ctx context.Context, sink string) error {
	op, err := s.operator()
	if err != nil {
		return err
	}
	_, err = op.PauseSink(ctx, s.p, audit.Actor{Name: "bench", Role: "admin", Source: "bench"}, sink, operator.Pause{By: "bench", Reason: "a paused backlog beside the measured sink"})
	return err
}

// hotTables are the outbox schema's tables: the queue, and whatever else
// the version under test keeps beside it (history, attempts, counters).
func (s outboxdStore) hotTables(ctx context.Context) ([]string, error) {
	rows, err := s.p.Query(ctx, `SELECT schemaname || '.' || tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, outboxd.DefaultSchema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (s outboxdStore) seedHistory(ctx context.Context, n int) error {
	if _, err := s.p.Exec(ctx, `
		INSERT INTO outbox.messages (sink, dedup_key, payload, status, attempts, sent_at)
		SELECT $1, 'h' || g, jsonb_build_object('n', g), 'sent', 1, now()
		FROM generate_series(1, $2::int) g`, noopSink, n); err != nil {
		return fmt.Errorf("seed outboxd history: %w", err)
	}
	_, err := s.p.Exec(ctx, `VACUUM ANALYZE outbox.messages`)
	return err
}

func (s outboxdStore) unfinished(ctx context.Context) (int64, error) {
	var n int64
	err := s.p.QueryRow(ctx, `SELECT count(*) FROM outbox.messages WHERE status <> 'sent'`).Scan(&n)
	return n, err
}

// migrateOutboxd creates outboxd's schema in a fresh database.
func migrateOutboxd(ctx context.Context, p *pgxpool.Pool) error {
	ob, err := outboxd.New(p, outboxd.Options{})
	if err != nil {
		return err
	}
	_, err = ob.Migrator().Migrate(ctx, p)
	return err
}

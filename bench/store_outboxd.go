package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core"
	"github.com/outboxd/outboxd/core/migrate"
)

// outboxdStore enqueues through outboxd's public API into the default
// outbox schema of its own database.
type outboxdStore struct{ p *pgxpool.Pool }

func (s outboxdStore) pool() *pgxpool.Pool { return s.p }
func (s outboxdStore) table() string       { return "outbox.messages" }

func (s outboxdStore) reset(ctx context.Context) error {
	_, err := s.p.Exec(ctx, `TRUNCATE outbox.messages, outbox.failed_attempts, outbox.sink_limits RESTART IDENTITY`)
	return err
}

func nextMessage() core.Message {
	n := seq.Add(1)
	return core.Message{Sink: noopSink, DedupKey: fmt.Sprintf("k%d", n), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

func (s outboxdStore) enqueueOne(ctx context.Context, tx pgx.Tx) (int64, error) {
	res, err := core.Enqueue(ctx, tx, nextMessage())
	return res.ID, err
}

func (s outboxdStore) enqueueBatch(ctx context.Context, tx pgx.Tx, n int) error {
	msgs := make([]core.Message, n)
	for i := range msgs {
		msgs[i] = nextMessage()
	}
	_, err := core.EnqueueBatch(ctx, tx, msgs)
	return err
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
	m, err := migrate.New(core.DefaultSchema)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, p)
	return err
}

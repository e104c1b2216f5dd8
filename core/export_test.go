package core

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/listener"
)

// ClaimQuery exposes the claim statement to the EXPLAIN test.
func (o *Outbox) ClaimQuery() string { return o.sql.claim }

// ClaimAndAbandon claims up to limit rows of sinks the way a relay does and
// then drops them, like a relay that dies before writing any outcome.
func (o *Outbox) ClaimAndAbandon(ctx context.Context, db DBTX, sinks []string, limit int, lease time.Duration) (int, error) {
	ids, _, err := o.Claim(ctx, db, sinks, limit, lease)
	return len(ids), err
}

// Claim claims up to limit rows of sinks the way a relay does and returns
// their ids and the lease token they were claimed under.
func (o *Outbox) Claim(ctx context.Context, db DBTX, sinks []string, limit int, lease time.Duration) ([]int64, uuid.UUID, error) {
	token := uuid.New()
	rows, err := db.Query(ctx, o.sql.claim, limit, lease, sinks, token, 0, time.Minute)
	if err != nil {
		return nil, token, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil); err != nil {
			return nil, token, err
		}
		ids = append(ids, id)
	}
	return ids, token, rows.Err()
}

// RegisterWaiter registers a claim loop for wake-ups of sinks on channel,
// the way a relay does, and returns its id.
func (o *Outbox) RegisterWaiter(ctx context.Context, db DBTX, channel string, sinks []string) (int64, error) {
	var id int64
	err := db.QueryRow(ctx, o.sql.registerWaiter, channel, sinks, time.Minute).Scan(&id)
	return id, err
}

// TestOutcome is one outcome for WriteOutcomes.
type TestOutcome struct {
	ID      int64
	Token   uuid.UUID
	Status  Status
	Err     string
	Receipt []byte
	Urgent  bool
}

// WriteOutcomes hands outcomes to a completer that lingers for linger, all
// at once, and returns, per outcome, whether its row was written.
func (o *Outbox) WriteOutcomes(pool *pgxpool.Pool, logger *slog.Logger, linger time.Duration, outcomes []TestOutcome) []bool {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := completer.New(pool, o.sql.finish, false, logger, 64)
	c.Linger = linger
	go c.Run()
	defer c.Stop()
	written := make([]bool, len(outcomes))
	var wg sync.WaitGroup
	for i, t := range outcomes {
		wg.Add(1)
		out := completer.Outcome{ID: t.ID, Token: t.Token, Status: string(t.Status), Receipt: t.Receipt,
			Urgent: t.Urgent, LeaseEnd: time.Now().Add(time.Minute),
			Done: func(ok bool) { written[i] = ok; wg.Done() }}
		if t.Err != "" {
			out.Err = &t.Err
		}
		c.Submit(out)
	}
	wg.Wait()
	return written
}

// ListenerApplicationName is the application_name of the LISTEN connection.
const ListenerApplicationName = listener.ApplicationName

// Statement is sql/<name>.sql with the outbox's schema filled in, for the
// EXPLAIN test and the overview benchmark.
func (o *Outbox) Statement(name string) string { return qualify(o.sql.ident, statement(name)) }

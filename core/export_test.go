package core

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ClaimQuery exposes the shared claim statement to the EXPLAIN test.
func (o *Outbox) ClaimQuery() string { return o.sql.claimAll }

// ClaimAndAbandon claims up to limit rows the way a relay does and then
// drops them, like a relay that dies before writing any outcome.
func (o *Outbox) ClaimAndAbandon(ctx context.Context, db DBTX, limit int, lease time.Duration) (int, error) {
	rows, err := db.Query(ctx, o.sql.claimAll, limit, lease, []string{}, uuid.New())
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// SubmitOutcomes hands one outcome per entry of urgent to a completer that
// lingers for linger, all at once, and returns when every one was written.
// The ids name no row, so each is written as a zombie (nothing changes).
func (o *Outbox) SubmitOutcomes(pool *pgxpool.Pool, linger time.Duration, urgent []bool) {
	c := newCompleter(pool, o.sql, slog.New(slog.DiscardHandler), 64)
	c.linger = linger
	go c.run()
	defer c.stop()
	var written sync.WaitGroup
	for i, u := range urgent {
		written.Add(1)
		c.submit(outcome{id: -int64(i + 1), token: uuid.New(), status: StatusSent, urgent: u,
			done: func(bool) { written.Done() }})
	}
	written.Wait()
}

package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/core/internal/completer"
	"github.com/outboxd/outboxd/core/internal/listener"
	"github.com/outboxd/outboxd/core/status"
	"github.com/outboxd/outboxd/internal/store"
)

// ClaimAndAbandon claims up to limit rows of sinks in schema the way a
// relay does and then drops them, like a relay that dies before writing any
// outcome.
func ClaimAndAbandon(ctx context.Context, db store.DBTX, schema string, sinks []string, limit int, lease time.Duration) (int, error) {
	ids, _, err := Claim(ctx, db, schema, sinks, limit, lease)
	return len(ids), err
}

// Claim claims up to limit rows of sinks in schema the way a relay does and
// returns their ids and the lease token they were claimed under.
func Claim(ctx context.Context, db store.DBTX, schema string, sinks []string, limit int, lease time.Duration) ([]int64, uuid.UUID, error) {
	token := uuid.New()
	q, err := store.New(schema)
	if err != nil {
		return nil, token, err
	}
	rows, err := q.Claim(ctx, db, store.ClaimParams{Sinks: sinks, Limit: limit, AliveFor: time.Minute, Token: token, Lease: lease})
	if err != nil {
		return nil, token, err
	}
	ids := make([]int64, len(rows))
	for i, row := range rows {
		ids[i] = row.ID
	}
	return ids, token, nil
}

// TestOutcome is one outcome for WriteOutcomes.
type TestOutcome struct {
	ID      int64
	Token   uuid.UUID
	Status  status.Row
	Err     string
	Receipt []byte
	Urgent  bool
}

// WriteOutcomes hands outcomes for rows in schema to a completer that
// lingers for linger, all at once, and returns, per outcome, whether its
// row was written.
func WriteOutcomes(pool *pgxpool.Pool, schema string, logger *slog.Logger, linger time.Duration, outcomes []TestOutcome) []bool {
	q, err := store.New(schema)
	if err != nil {
		panic(err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := completer.New(pool, q, false, logger, 64)
	c.Linger = linger
	go c.Run()
	defer c.Stop()
	written := make([]bool, len(outcomes))
	var wg sync.WaitGroup
	for i, t := range outcomes {
		wg.Add(1)
		out := completer.Outcome{ID: t.ID, Token: t.Token, Status: string(t.Status), Receipt: t.Receipt,
			Urgent: t.Urgent, LeaseEnd: time.Now().Add(time.Minute),
			Done: completer.ReportFunc(func(ok bool) { written[i] = ok; wg.Done() })}
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

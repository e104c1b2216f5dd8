package core

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Status is a row's place in its life cycle.
type Status string

// The statuses a row moves through.
const (
	StatusPending    Status = "pending"
	StatusInProgress Status = "in_progress"
	StatusSent       Status = "sent"
	StatusFailed     Status = "failed"
	StatusDead       Status = "dead"
)

// SinkStats counts one sink's rows by status.
type SinkStats struct {
	Pending    int64 `json:"pending"`
	InProgress int64 `json:"in_progress"`
	Failed     int64 `json:"failed"`
	Sent       int64 `json:"sent"`
	Dead       int64 `json:"dead"`
	// OldestPendingAge is how long the oldest row still waiting for delivery
	// (pending or failed) has been waiting; zero when none waits.
	OldestPendingAge time.Duration `json:"-"`
}

// Stats returns per-sink row counts by status and the age of the oldest
// waiting row, measured on the database clock.
func (o *Outbox) Stats(ctx context.Context, db DBTX) (map[string]SinkStats, error) {
	rows, err := db.Query(ctx, qualify(o.sql.ident, `
		SELECT sink, status, count(*),
		       COALESCE(extract(epoch FROM now() - min(created_at) FILTER (WHERE status IN ('pending', 'failed'))), 0)
		FROM {schema}.messages GROUP BY sink, status`))
	if err != nil {
		return nil, fmt.Errorf("outbox: stats: %w", err)
	}
	stats := map[string]SinkStats{}
	var (
		sink, status string
		count        int64
		ageSeconds   float64
	)
	_, err = pgx.ForEachRow(rows, []any{&sink, &status, &count, &ageSeconds}, func() error {
		s := stats[sink]
		switch Status(status) {
		case StatusPending:
			s.Pending = count
		case StatusInProgress:
			s.InProgress = count
		case StatusFailed:
			s.Failed = count
		case StatusSent:
			s.Sent = count
		case StatusDead:
			s.Dead = count
		}
		if age := time.Duration(ageSeconds * float64(time.Second)); age > s.OldestPendingAge {
			s.OldestPendingAge = age
		}
		stats[sink] = s
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: stats: %w", err)
	}
	return stats, nil
}

// DeadLetter is a dead row with the errors of its failed attempts.
type DeadLetter struct {
	ID        int64     `json:"id"`
	Sink      string    `json:"sink"`
	DedupKey  string    `json:"dedup_key"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	UpdatedAt time.Time `json:"updated_at"`
	// Errors lists each recorded failed attempt, oldest first.
	Errors []AttemptError `json:"errors,omitempty"`
}

// AttemptError is one failed attempt.
type AttemptError struct {
	Attempt  int       `json:"attempt"`
	FailedAt time.Time `json:"failed_at"`
	Error    string    `json:"error"`
}

// DeadLetterFilter selects dead letters; zero values select everything.
type DeadLetterFilter struct {
	Sink  string
	Limit int // 0 means DefaultDeadLetterLimit
}

// DefaultDeadLetterLimit bounds one page of dead letters.
const DefaultDeadLetterLimit = 100

// DeadLetters lists dead rows, oldest first, with their recorded errors.
func (o *Outbox) DeadLetters(ctx context.Context, db DBTX, f DeadLetterFilter) ([]DeadLetter, error) {
	if f.Limit <= 0 {
		f.Limit = DefaultDeadLetterLimit
	}
	rows, err := db.Query(ctx, qualify(o.sql.ident, `
		SELECT m.id, m.sink, m.dedup_key, m.attempts, COALESCE(m.last_error, ''), m.updated_at,
		       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error) ORDER BY a.attempt)
		                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]')
		FROM {schema}.messages m
		WHERE m.status = 'dead' AND ($1 = '' OR m.sink = $1)
		ORDER BY m.id
		LIMIT $2`), f.Sink, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead letters: %w", err)
	}
	letters, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		err := row.Scan(&d.ID, &d.Sink, &d.DedupKey, &d.Attempts, &d.LastError, &d.UpdatedAt, &d.Errors)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list dead letters: %w", err)
	}
	return letters, nil
}

// RedriveFilter selects dead letters to redrive or purge: the given IDs, or
// every dead row (of Sink, when set) when All is true.
type RedriveFilter struct {
	IDs  []int64
	All  bool
	Sink string
}

func (f RedriveFilter) validate() error {
	if len(f.IDs) == 0 && !f.All {
		return fmt.Errorf("outbox: select dead letters by id or ask for all of them")
	}
	if len(f.IDs) > 0 && f.All {
		return fmt.Errorf("outbox: select dead letters by id or all, not both")
	}
	return nil
}

// Redrive moves the selected dead rows back to pending with their attempts
// reset, and wakes the relays. It returns how many rows it moved.
func (o *Outbox) Redrive(ctx context.Context, db DBTX, f RedriveFilter) (int64, error) {
	if err := f.validate(); err != nil {
		return 0, err
	}
	var n int64
	err := db.QueryRow(ctx, qualify(o.sql.ident, `
		WITH moved AS (
			UPDATE {schema}.messages
			SET status = 'pending', attempts = 0, available_at = now(), updated_at = now(),
			    lease_token = NULL, lease_expires_at = NULL
			WHERE status = 'dead'
			  AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)))
			RETURNING id
		), wake AS (SELECT pg_notify($4, '') FROM moved LIMIT 1)
		SELECT count(*) FROM moved LEFT JOIN wake ON true`), f.IDs, f.All, f.Sink, o.channel).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("outbox: redrive: %w", err)
	}
	return n, nil
}

// Purge deletes the selected dead rows and their recorded errors. It returns
// how many rows it deleted.
func (o *Outbox) Purge(ctx context.Context, db DBTX, f RedriveFilter) (int64, error) {
	if err := f.validate(); err != nil {
		return 0, err
	}
	var n int64
	err := db.QueryRow(ctx, qualify(o.sql.ident, `
		WITH gone AS (
			DELETE FROM {schema}.messages
			WHERE status = 'dead'
			  AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)))
			RETURNING id
		), errs AS (
			DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
		)
		SELECT count(*) FROM gone`), f.IDs, f.All, f.Sink).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("outbox: purge: %w", err)
	}
	return n, nil
}

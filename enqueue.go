package outboxd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outboxd/outboxd/internal/store"
)

// EnqueueResult says what happened to one enqueued message.
type EnqueueResult struct {
	ID int64
	// Created is false when a row with the same (sink, dedup key) already
	// existed; that is not an error, and ID is the existing row's.
	Created bool
}

// Enqueue stores msg in the default outbox. See [Outbox.Enqueue].
func Enqueue(ctx context.Context, db DBTX, msg Message) (EnqueueResult, error) {
	return defaultOutbox().Enqueue(ctx, db, msg)
}

// EnqueueBatch stores msgs in the default outbox. See [Outbox.EnqueueBatch].
func EnqueueBatch(ctx context.Context, db DBTX, msgs []Message) ([]EnqueueResult, error) {
	return defaultOutbox().EnqueueBatch(ctx, db, msgs)
}

// Enqueue validates msg and inserts it, unless its (sink, dedup key) is
// already stored. Pass the caller's pgx.Tx to make the message part of that
// transaction. Relays are woken with pg_notify in the same transaction, so
// only committed messages wake anyone.
func (o *Outbox) Enqueue(ctx context.Context, db DBTX, msg Message) (EnqueueResult, error) {
	v, err := o.validate(ctx, msg)
	if err != nil {
		return EnqueueResult{}, err
	}
	var res EnqueueResult
	res.ID, err = o.q.Enqueue(ctx, db, store.EnqueueParams{Sink: v.sink, DedupKey: v.dedupKey, Payload: v.payload,
		Headers: v.headers, OrderingKey: v.orderingKey, MaxAttempts: v.maxAttempts, AvailableAt: v.availableAt})
	switch {
	case err == nil:
		res.Created = true
		o.countEnqueues(ctx, v.sink, true, 1)
		return res, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return res, fmt.Errorf("outbox: enqueue %s/%s: %w", v.sink, v.dedupKey, err)
	}
	// A duplicate. This lookup is a statement of its own so that, under READ
	// COMMITTED, it sees a conflicting row committed by a concurrent enqueue
	// after the insert's snapshot was taken.
	if res.ID, err = o.q.LookupID(ctx, db, v.sink, v.dedupKey); err != nil {
		return res, fmt.Errorf("outbox: look up duplicate %s/%s: %w", v.sink, v.dedupKey, err)
	}
	o.countEnqueues(ctx, v.sink, false, 1)
	return res, nil
}

// EnqueueBatch validates and inserts many messages in one statement and
// reports, per message and in the same order, the row id and whether it was
// created. Nothing is written when any message is invalid: the error is
// then a *BatchError naming it. A (sink, dedup
// key) repeated within the batch is created once; its later occurrences
// report duplicates.
//
// Given a pgx.Tx or a *pgxpool.Pool, EnqueueBatch first tries a plain
// multi-row INSERT, which PostgreSQL runs faster than INSERT ... ON CONFLICT
// because it skips a speculative insertion per row. Inside a transaction that
// attempt runs in a savepoint (a subtransaction, released at once), so a
// duplicate key only undoes the attempt; the batch is then inserted again
// with ON CONFLICT DO NOTHING, which is also what every other DBTX gets.
// (The savepoint counts as a subtransaction: a transaction that enqueues
// more than 64 batches overflows PostgreSQL's subtransaction cache, which
// slows snapshots server-wide while it runs. Enqueue fewer, larger batches.)
func (o *Outbox) EnqueueBatch(ctx context.Context, db DBTX, msgs []Message) ([]EnqueueResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	cols := &store.BatchColumns{
		Sinks:        make([]string, len(msgs)),
		DedupKeys:    make([]string, len(msgs)),
		Payloads:     make([][]byte, len(msgs)),
		Headers:      make([][]byte, len(msgs)),
		OrderingKeys: make([]*string, len(msgs)),
		MaxAttempts:  make([]*int32, len(msgs)),
		AvailableAt:  make([]*time.Time, len(msgs)),
	}
	var shape store.BatchShape
	for i, m := range msgs {
		v, err := o.validate(ctx, m)
		if err != nil {
			return nil, &BatchError{Index: i, Err: fmt.Errorf("message %d: %w", i, err)}
		}
		cols.Sinks[i], cols.DedupKeys[i] = v.sink, v.dedupKey
		cols.Payloads[i], cols.Headers[i] = v.payload, v.headers
		cols.OrderingKeys[i], cols.MaxAttempts[i], cols.AvailableAt[i] = v.orderingKey, v.maxAttempts, v.availableAt
		shape |= v.shape()
	}

	results, err := o.insertBatchPlain(ctx, db, shape, cols)
	if err == nil && results == nil {
		results, err = o.insertBatchSkippingDuplicates(ctx, db, shape, cols)
	}
	if err != nil {
		return nil, err
	}
	o.countBatch(ctx, cols.Sinks, results)
	return results, nil
}

// plainInsertPause is how many batches of an Outbox skip the plain INSERT
// after one of them hit a duplicate key: a producer that re-sends batches
// would otherwise pay for every batch twice.
const plainInsertPause = 16

// insertBatchPlain inserts the batch without ON CONFLICT. It returns nil
// results and no error when it wrote nothing and EnqueueBatch must take the
// ON CONFLICT path: a key already exists, or db is a handle whose
// transaction it cannot protect with a savepoint (a *pgx.Conn may be inside
// a transaction begun with a plain BEGIN).
func (o *Outbox) insertBatchPlain(ctx context.Context, db DBTX, shape store.BatchShape, cols *store.BatchColumns) ([]EnqueueResult, error) {
	n := len(cols.Sinks)
	if o.plainInsertPaused.Load() > 0 {
		o.plainInsertPaused.Add(-1)
		return nil, nil
	}
	var (
		ids []int64
		err error
	)
	switch db := db.(type) {
	case *pgxpool.Pool:
		// Each statement commits on its own: a failed one wrote nothing.
		ids, err = o.q.EnqueueBatchPlain(ctx, db, shape, cols)
	case pgx.Tx:
		ids, err = o.q.EnqueueBatchPlainInSavepoint(ctx, db, shape, cols)
	default:
		return nil, nil
	}
	switch {
	case isDedupConflict(err):
		o.plainInsertPaused.Store(plainInsertPause)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", n, err)
	case len(ids) != n:
		return nil, fmt.Errorf("outbox: enqueue batch of %d: inserted %d rows", n, len(ids))
	}
	// The rows were inserted in the batch's order (ORDER BY ord), and
	// identity values are drawn in insertion order: the i-th smallest id is
	// the i-th message's, whatever order RETURNING lists them in.
	slices.Sort(ids)
	results := make([]EnqueueResult, n)
	for i, id := range ids {
		results[i] = EnqueueResult{ID: id, Created: true}
	}
	return results, nil
}

const (
	// uniqueViolation is PostgreSQL's SQLSTATE for a unique constraint
	// violation.
	uniqueViolation = "23505"
	// keyConstraint is the primary key of message_keys, which decides
	// duplicates (see migrations/013_history.sql).
	keyConstraint = "message_keys_pkey"
	// dedupConstraint is the UNIQUE (sink, dedup_key) constraint of the
	// messages table (see migrations/001_messages.sql): a plain insert hits
	// it for a row stored before migration 013, which has no key yet.
	dedupConstraint = "messages_sink_dedup_key_key"
)

// isDedupConflict reports whether err is a unique violation of the (sink,
// dedup key) of a key or of a row.
func isDedupConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation &&
		(pgErr.ConstraintName == keyConstraint || pgErr.ConstraintName == dedupConstraint)
}

// insertBatchSkippingDuplicates inserts the batch with ON CONFLICT DO
// NOTHING and finds the ids of the messages that were duplicates.
func (o *Outbox) insertBatchSkippingDuplicates(ctx context.Context, db DBTX, shape store.BatchShape, cols *store.BatchColumns) ([]EnqueueResult, error) {
	n := len(cols.Sinks)
	inserted, err := o.q.EnqueueBatch(ctx, db, shape, cols)
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", n, err)
	}
	// Map each created row back to the first message with its key; every
	// other message is a duplicate, of a row in the table or earlier in
	// this batch.
	type key struct{ sink, dedup string }
	index := make(map[key]int, n)
	for i := n - 1; i >= 0; i-- {
		index[key{cols.Sinks[i], cols.DedupKeys[i]}] = i
	}
	ids := make(map[key]int64, n)
	created := make(map[key]bool, n)
	for _, r := range inserted {
		ids[key{r.Sink, r.DedupKey}], created[key{r.Sink, r.DedupKey}] = r.ID, true
	}
	if len(ids) < len(index) {
		// Some already existed: one more statement finds them. It runs
		// apart from the insert so that, under READ COMMITTED, it also sees
		// rows a concurrent enqueue committed after the insert began.
		var sinks, keys []string
		for k := range index {
			if _, ok := ids[k]; !ok {
				sinks, keys = append(sinks, k.sink), append(keys, k.dedup)
			}
		}
		found, err := o.q.LookupIDs(ctx, db, sinks, keys)
		if err != nil {
			return nil, fmt.Errorf("outbox: look up %d duplicates: %w", len(sinks), err)
		}
		for _, r := range found {
			ids[key{r.Sink, r.DedupKey}] = r.ID
		}
	}
	results := make([]EnqueueResult, n)
	for i := range results {
		k := key{cols.Sinks[i], cols.DedupKeys[i]}
		results[i] = EnqueueResult{ID: ids[k], Created: created[k] && index[k] == i}
	}
	return results, nil
}

// countBatch adds a batch's results to the enqueue counter, one Add per run
// of messages with the same sink and result rather than one per message.
func (o *Outbox) countBatch(ctx context.Context, sinks []string, results []EnqueueResult) {
	start := 0
	for i := 1; i <= len(results); i++ {
		if i == len(results) || sinks[i] != sinks[start] || results[i].Created != results[start].Created {
			o.countEnqueues(ctx, sinks[start], results[start].Created, int64(i-start))
			start = i
		}
	}
}

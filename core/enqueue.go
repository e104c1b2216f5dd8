package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
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
	return Default.Enqueue(ctx, db, msg)
}

// EnqueueBatch stores msgs in the default outbox. See [Outbox.EnqueueBatch].
func EnqueueBatch(ctx context.Context, db DBTX, msgs []Message) ([]EnqueueResult, error) {
	return Default.EnqueueBatch(ctx, db, msgs)
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
	err = db.QueryRow(ctx, o.sql.enqueue, v.sink, v.dedupKey, v.payload, v.headers,
		v.orderingKey, v.maxAttempts, v.availableAt).Scan(&res.ID)
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
	if err := db.QueryRow(ctx, o.sql.lookupID, v.sink, v.dedupKey).Scan(&res.ID); err != nil {
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
	cols := batchColumns{
		sinks:       make([]string, len(msgs)),
		keys:        make([]string, len(msgs)),
		payloads:    make([][]byte, len(msgs)),
		headers:     make([][]byte, len(msgs)),
		orderings:   make([]*string, len(msgs)),
		maxAttempts: make([]*int32, len(msgs)),
		available:   make([]*time.Time, len(msgs)),
	}
	var shape batchShape
	for i, m := range msgs {
		v, err := o.validate(ctx, m)
		if err != nil {
			return nil, &BatchError{Index: i, Err: fmt.Errorf("message %d: %w", i, err)}
		}
		cols.sinks[i], cols.keys[i] = v.sink, v.dedupKey
		cols.payloads[i], cols.headers[i] = v.payload, v.headers
		cols.orderings[i], cols.maxAttempts[i], cols.available[i] = v.orderingKey, v.maxAttempts, v.availableAt
		shape |= v.shape()
	}
	// The arrays follow optionalBatchColumns' order; see enqueueBatchSQL.
	args := []any{cols.sinks, cols.keys, cols.payloads}
	for i, column := range []any{cols.headers, cols.orderings, cols.maxAttempts, cols.available} {
		if shape&(1<<i) != 0 {
			args = append(args, column)
		}
	}

	results, err := o.insertBatchPlain(ctx, db, shape, args, len(msgs))
	if err == nil && results == nil {
		results, err = o.insertBatchSkippingDuplicates(ctx, db, shape, args, cols)
	}
	if err != nil {
		return nil, err
	}
	o.countBatch(ctx, cols.sinks, results)
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
func (o *Outbox) insertBatchPlain(ctx context.Context, db DBTX, shape batchShape, args []any, n int) ([]EnqueueResult, error) {
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
		ids, err = queryIDs(ctx, db, o.sql.enqueueBatchPlain[shape], args)
	case pgx.Tx:
		ids, err = queryIDsInSavepoint(ctx, db, o.sql.enqueueBatchPlain[shape], args)
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
	// dedupConstraint is the UNIQUE (sink, dedup_key) constraint of the
	// messages table (see migrations/001_messages.sql).
	dedupConstraint = "messages_sink_dedup_key_key"
)

// isDedupConflict reports whether err is a unique violation of the (sink,
// dedup key) constraint.
func isDedupConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation && pgErr.ConstraintName == dedupConstraint
}

// batchSavepoint names the savepoint of insertBatchPlain. Savepoint names
// may repeat: if the caller uses the same one, ours is the innermost.
const batchSavepoint = "outboxd_enqueue_batch"

// queryIDsInSavepoint runs the id-returning statement sql inside a savepoint
// of tx, in one round trip. When it fails, the savepoint is rolled back, so
// the caller's transaction stays usable and keeps its earlier work.
func queryIDsInSavepoint(ctx context.Context, tx pgx.Tx, sql string, args []any) ([]int64, error) {
	batch := &pgx.Batch{}
	batch.Queue("SAVEPOINT " + batchSavepoint)
	batch.Queue(sql, args...)
	batch.Queue("RELEASE SAVEPOINT " + batchSavepoint)
	results := tx.SendBatch(ctx, batch)
	_, err := results.Exec()
	var ids []int64
	if err == nil {
		rows, _ := results.Query() // an error comes back from CollectRows
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err == nil {
		_, err = results.Exec()
	}
	if closeErr := results.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		if _, rbErr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+batchSavepoint+"; RELEASE SAVEPOINT "+batchSavepoint); rbErr != nil {
			return nil, fmt.Errorf("%w (and rolling back to the savepoint: %v)", err, rbErr)
		}
		return nil, err
	}
	return ids, nil
}

func queryIDs(ctx context.Context, db DBTX, sql string, args []any) ([]int64, error) {
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// insertBatchSkippingDuplicates inserts the batch with ON CONFLICT DO
// NOTHING and finds the ids of the messages that were duplicates.
func (o *Outbox) insertBatchSkippingDuplicates(ctx context.Context, db DBTX, shape batchShape, args []any, cols batchColumns) ([]EnqueueResult, error) {
	n := len(cols.sinks)
	rows, err := db.Query(ctx, o.sql.enqueueBatch[shape], args...)
	if err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", n, err)
	}
	// Map each created row back to the first message with its key; every
	// other message is a duplicate, of a row in the table or earlier in
	// this batch.
	type key struct{ sink, dedup string }
	index := make(map[key]int, n)
	for i := n - 1; i >= 0; i-- {
		index[key{cols.sinks[i], cols.keys[i]}] = i
	}
	ids := make(map[key]int64, n)
	created := make(map[key]bool, n)
	if err := collectIDs(rows, func(id int64, sink, dedup string) {
		ids[key{sink, dedup}], created[key{sink, dedup}] = id, true
	}); err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch of %d: %w", n, err)
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
		lookup, err := db.Query(ctx, o.sql.lookupIDs, sinks, keys)
		if err != nil {
			return nil, fmt.Errorf("outbox: look up %d duplicates: %w", len(sinks), err)
		}
		if err := collectIDs(lookup, func(id int64, sink, dedup string) { ids[key{sink, dedup}] = id }); err != nil {
			return nil, fmt.Errorf("outbox: look up %d duplicates: %w", len(sinks), err)
		}
	}
	results := make([]EnqueueResult, n)
	for i := range results {
		k := key{cols.sinks[i], cols.keys[i]}
		results[i] = EnqueueResult{ID: ids[k], Created: created[k] && index[k] == i}
	}
	return results, nil
}

type batchColumns struct {
	sinks, keys       []string
	payloads, headers [][]byte // JSON texts
	orderings         []*string
	maxAttempts       []*int32
	available         []*time.Time
}

// collectIDs reads (id, sink, dedup_key) rows.
func collectIDs(rows pgx.Rows, add func(id int64, sink, dedup string)) error {
	var (
		id          int64
		sink, dedup string
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &sink, &dedup}, func() error {
		add(id, sink, dedup)
		return nil
	})
	return err
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

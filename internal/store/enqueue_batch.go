package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// BatchShape says which optional columns a batch enqueue sends: a bit per
// entry of optionalBatchColumns. A column no message of the batch sets is
// left out of the statement and takes its default: every array PostgreSQL
// unpacks costs, and a batch of plain messages (the common case) enqueued
// ~25% slower when it shipped four arrays of NULLs and empty objects.
type BatchShape uint8

// BatchShapes is the number of shapes: every subset of the optional columns.
const BatchShapes = 1 << len(optionalBatchColumns)

// optionalBatchColumns are the columns of messages that a batch may leave to
// their defaults, in the order their arrays follow sink, dedup key and
// payload ($1-$3) in the statement.
var optionalBatchColumns = [...]struct{ name, arrayType, value string }{
	{"headers", "jsonb[]", "headers"},
	{"ordering_key", "text[]", "ordering_key"},
	{"max_attempts", "int[]", "max_attempts"},
	// Messages without a time of their own are available at once.
	{"available_at", "timestamptz[]", "COALESCE(available_at, now())"},
}

// enqueueBatchSQL is the multi-row form of sql/enqueue.sql for one shape
// (the message's key in message_keys first, then its row, migration 013):
// the columns arrive as arrays, so the statement is the same whatever the
// batch size. Rows are inserted in the order of the arrays, so ids follow
// the batch's order (which per-key ordering relies on). It wakes a relay
// loop waiting for each sink of the rows it created (wake(), migration 006).
//
// With skipDuplicates the statement returns the id, sink and dedup key of
// the rows it created, and core's EnqueueBatch looks up the ids of the
// duplicates afterwards, only when there are any. Without, a duplicate
// fails the statement and it returns every new id.
//
// The wake-ups are joined with a CROSS JOIN: a LEFT JOIN to a one-row
// subquery whose columns nothing reads is removed by PostgreSQL's planner,
// and the wake CTE then never runs.
func enqueueBatchSQL(shape BatchShape, skipDuplicates bool) string {
	columns := []string{"sink", "dedup_key", "payload"}
	values := []string{"sink", "dedup_key", "payload"}
	arrays := []string{"$1::text[]", "$2::text[]", "$3::jsonb[]"}
	for i, c := range optionalBatchColumns {
		if shape&(1<<i) != 0 {
			columns, values = append(columns, c.name), append(values, c.value)
			arrays = append(arrays, fmt.Sprintf("$%d::%s", len(arrays)+1, c.arrayType))
		}
	}
	// Each message draws its id first (in the batch's order: a volatile
	// output is computed after the sort), so its key and its row carry the
	// same one. With skipDuplicates only the messages whose key this
	// statement took get a row; without, a duplicate key fails it.
	keyFilter, onConflict, taken, returning := "", "", "", "ins.id"
	if skipDuplicates {
		keyFilter = "WHERE NOT EXISTS (SELECT FROM {schema}.messages m WHERE m.sink = t.sink AND m.dedup_key = t.dedup_key)"
		onConflict, taken, returning = "ON CONFLICT (sink, dedup_key) DO NOTHING", "JOIN k USING (id)", "ins.id, ins.sink, ins.dedup_key"
	}
	return fmt.Sprintf(statementName("enqueue_batch")+`
WITH t AS (
    SELECT nextval('{schema}.messages_id_seq') AS id, *
    FROM unnest(%[3]s) WITH ORDINALITY AS t(%[1]s, ord)
    ORDER BY ord
), k AS (
    INSERT INTO {schema}.message_keys (sink, dedup_key, id)
    SELECT sink, dedup_key, id FROM t %[4]s
    ORDER BY id
    %[5]s
    RETURNING id
), ins AS (
    INSERT INTO {schema}.messages (id, %[1]s)
    OVERRIDING SYSTEM VALUE
    SELECT id, %[2]s
    FROM t %[6]s
    ORDER BY id
    RETURNING id, sink, dedup_key
), wake AS (
    SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM ins) s
)
SELECT %[7]s FROM ins CROSS JOIN (SELECT count(*) FROM wake) w`,
		strings.Join(columns, ", "), strings.Join(values, ", "), strings.Join(arrays, ", "), keyFilter, onConflict, taken, returning)
}

// BatchColumns are the messages of a batch enqueue, one array per column,
// each in the batch's order.
type BatchColumns struct {
	Sinks, DedupKeys  []string
	Payloads, Headers [][]byte // JSON texts
	OrderingKeys      []*string
	MaxAttempts       []*int32
	AvailableAt       []*time.Time
}

// args are the statement's arguments for shape: the arrays follow
// optionalBatchColumns' order; see enqueueBatchSQL.
func (c *BatchColumns) args(shape BatchShape) []any {
	args := []any{c.Sinks, c.DedupKeys, c.Payloads}
	for i, column := range []any{c.Headers, c.OrderingKeys, c.MaxAttempts, c.AvailableAt} {
		if shape&(1<<i) != 0 {
			args = append(args, column)
		}
	}
	return args
}

// EnqueueBatchRow is a row the batch enqueue that skips duplicates
// created.
type EnqueueBatchRow struct {
	ID             int64
	Sink, DedupKey string
}

// EnqueueBatch runs the batch enqueue of shape that skips duplicates and
// returns the rows it created.
func (q *Queries) EnqueueBatch(ctx context.Context, db DBTX, shape BatchShape, cols *BatchColumns) ([]EnqueueBatchRow, error) {
	rows, err := db.Query(ctx, q.enqueueBatch[shape], cols.args(shape)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (EnqueueBatchRow, error) {
		var r EnqueueBatchRow
		err := row.Scan(&r.ID, &r.Sink, &r.DedupKey)
		return r, err
	})
}

// EnqueueBatchPlain runs the batch enqueue of shape that fails on a
// duplicate and returns the ids of the rows it created, in no particular
// order.
func (q *Queries) EnqueueBatchPlain(ctx context.Context, db DBTX, shape BatchShape, cols *BatchColumns) ([]int64, error) {
	rows, err := db.Query(ctx, q.enqueueBatchPlain[shape], cols.args(shape)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// batchSavepoint names the savepoint of EnqueueBatchPlainInSavepoint.
// Savepoint names may repeat: if the caller uses the same one, ours is the
// innermost.
const batchSavepoint = "outboxd_enqueue_batch"

// EnqueueBatchPlainInSavepoint is EnqueueBatchPlain inside a savepoint of
// tx, in one round trip. When it fails, the savepoint is rolled back, so
// the caller's transaction stays usable and keeps its earlier work.
func (q *Queries) EnqueueBatchPlainInSavepoint(ctx context.Context, tx pgx.Tx, shape BatchShape, cols *BatchColumns) ([]int64, error) {
	batch := &pgx.Batch{}
	batch.Queue("SAVEPOINT " + batchSavepoint)
	batch.Queue(q.enqueueBatchPlain[shape], cols.args(shape)...)
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

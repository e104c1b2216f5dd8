// Package store owns every SQL statement outboxd runs against its tables:
// one commented file each in sql/, named for what it does, with the schema
// filled in once per outbox. The engine's packages (core, core/relay,
// core/operator, core/migrate) and routing run them; nothing outside the
// module can.
package store

import "strings"

// Every SQL statement outboxd runs against its tables is a file in sql/,
// named for what it does and commented with its parameters, except the
// batch enqueue, whose column list varies and is assembled in
// enqueue_batch.go from fixed fragments. Each file's header (see package
// internal/sqlgen) declares its parameters and columns, and
// queries.gen.go, generated from the files, runs them with typed
// arguments and rows. Migrations are in core/migrate. Nothing
// user-supplied is ever spliced into a statement except the schema
// identifier, which New validates and quotes.
//
// The statements whose filters are optional (dead_letters, messages_search,
// purge, redrive: "oneShot" in their comments) run with the header's mode
// cache_describe, as an unnamed statement that PostgreSQL plans with the
// values given: the tests of unused filters ('' or NULL) fold away and the
// plan can use the index the given filters call for. A cached, generic
// plan would have to serve every combination with one scan.
//
//go:generate go run ./internal/sqlgen/cmd/sqlgen -dir sql -out queries.gen.go

// PausePrefix starts the payload of a notification on Queries.Channel
// that makes every relay reload its pauses and circuit breakers ("pause
// <sink>": a sink paused or resumed, a breaker opened or closed); any
// other notification there wakes every loop.
const PausePrefix = "pause "

// Queries runs every statement of one outbox, with its schema filled in.
// They are built once per schema, by New; the methods of queries.gen.go
// and enqueue_batch.go run them.
type Queries struct {
	// Schema is the schema's name, Ident the same quoted for SQL and
	// Channel the pg_notify channel that wakes its relays.
	Schema, Ident, Channel string

	text Texts
	// enqueueBatch skips duplicates (ON CONFLICT DO NOTHING);
	// enqueueBatchPlain fails on the first one.
	enqueueBatch, enqueueBatchPlain [BatchShapes]string
}

func newQueries(schema, ident string) *Queries {
	q := &Queries{Schema: schema, Ident: ident, Channel: schema + wakeupChannelSuffix, text: newTexts(ident)}
	for shape := range BatchShape(BatchShapes) {
		q.enqueueBatch[shape] = qualify(ident, enqueueBatchSQL(shape, true))
		q.enqueueBatchPlain[shape] = qualify(ident, enqueueBatchSQL(shape, false))
	}
	return q
}

// Texts returns the text of every statement as the server receives it,
// with the schema filled in: for the EXPLAIN tests and the benchmarks.
func (q *Queries) Texts() Texts { return q.text }

// EnqueueBatchText returns the batch enqueue's text for shape, with or
// without skipping duplicates: for the EXPLAIN tests and the benchmarks.
func (q *Queries) EnqueueBatchText(shape BatchShape, skipDuplicates bool) string {
	if skipDuplicates {
		return q.enqueueBatch[shape]
	}
	return q.enqueueBatchPlain[shape]
}

// statementName is the first line of the statement called name, the
// convention of sqlc (which River follows) that the generated texts keep
// too: the statement can be told apart in pg_stat_activity,
// pg_stat_statements and logs.
func statementName(name string) string { return "-- name: " + name + "\n" }

// qualify replaces the {schema} placeholder of a query with the quoted schema.
func qualify(ident, query string) string {
	return strings.ReplaceAll(query, "{schema}", ident)
}

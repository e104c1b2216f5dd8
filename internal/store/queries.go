// Package store owns every SQL statement outboxd runs against its tables:
// one commented file each in sql/, named for what it does, with the schema
// filled in once per outbox. The engine's packages (core, core/relay,
// core/operator, core/migrate) and routing run them; nothing outside the
// module can.
package store

import (
	"embed"
	"fmt"
	"strings"
)

// Every SQL statement outboxd runs against its tables is a file in sql/,
// named for what it does and commented with its parameters, except the
// batch enqueue, whose column list varies and is assembled below from fixed
// fragments. Migrations are in migrations/. Nothing user-supplied is ever
// spliced into a statement except the schema identifier, which New
// validates and quotes.
//
//go:embed sql/*.sql
var statementFiles embed.FS

// Queries holds every statement of one outbox, with its schema filled in.
// They are built once per schema, by New.
type Queries struct {
	// Schema is the schema's name, Ident the same quoted for SQL and
	// Channel the pg_notify channel that wakes its relays.
	Schema, Ident, Channel string

	Enqueue, LookupID, LookupIDs string
	Publish, PublishBatch        string
	// EnqueueBatch skips duplicates (ON CONFLICT DO NOTHING);
	// EnqueueBatchPlain fails on the first one.
	EnqueueBatch, EnqueueBatchPlain [BatchShapes]string

	Claim, Finish                           string
	ReservePermits, PauseSink, ActivePauses string
	PruneSent, UnconfiguredSinks            string
	WaitingRows                             string
	RegisterWaiter, UnregisterWaiters       string
	PruneWaiters                            string
	PruneThreads, PruneKeyLimits            string
	FoldDroppedEvents, DroppedEvents        string
	ReserveKeyPermits                       string

	Stats, DeadLetters, Redrive, Purge string

	Message, MessagesSearch                     string
	PauseSinkByHand, ResumeSink, SinkPauses     string
	TakeStatsLead, TakeStatsSnapshot, StatsSnap string
	AddDeliveryMinutes, DeliveryRates           string
	PruneDeliveryMinutes                        string

	LockTransaction                          string
	MigrationsPrepare, MigrationsApplied     string
	MigrationsRecord, MigrationsLedgerExists string
	SetSearchPath                            string

	// Routing's statements (package routing).
	ActiveRoutes, AppliedTarget, ApplyRoutes string
}

func newQueries(schema, ident string) *Queries {
	q := &Queries{Schema: schema, Ident: ident, Channel: schema + wakeupChannelSuffix}
	for shape := range BatchShape(BatchShapes) {
		q.EnqueueBatch[shape] = qualify(ident, enqueueBatchSQL(shape, true))
		q.EnqueueBatchPlain[shape] = qualify(ident, enqueueBatchSQL(shape, false))
	}
	for file, dst := range map[string]*string{
		"enqueue": &q.Enqueue, "lookup_id": &q.LookupID, "lookup_ids": &q.LookupIDs,
		"publish": &q.Publish, "publish_batch": &q.PublishBatch,
		"claim": &q.Claim, "finish": &q.Finish,
		"reserve_permits": &q.ReservePermits, "pause_sink": &q.PauseSink, "active_pauses": &q.ActivePauses,
		"prune_sent": &q.PruneSent, "unconfigured_sinks": &q.UnconfiguredSinks, "waiting_rows": &q.WaitingRows,
		"register_waiter": &q.RegisterWaiter, "unregister_waiters": &q.UnregisterWaiters, "prune_waiters": &q.PruneWaiters,
		"prune_threads": &q.PruneThreads, "prune_key_limits": &q.PruneKeyLimits,
		"fold_dropped_events": &q.FoldDroppedEvents, "dropped_events": &q.DroppedEvents,
		"reserve_key_permits": &q.ReserveKeyPermits,
		"stats":               &q.Stats, "dead_letters": &q.DeadLetters, "redrive": &q.Redrive, "purge": &q.Purge,
		"message": &q.Message, "messages_search": &q.MessagesSearch,
		"pause_sink_by_hand": &q.PauseSinkByHand, "resume_sink": &q.ResumeSink, "sink_pauses": &q.SinkPauses,
		"take_stats_lead": &q.TakeStatsLead, "take_stats_snapshot": &q.TakeStatsSnapshot, "stats_snapshot": &q.StatsSnap,
		"add_delivery_minutes": &q.AddDeliveryMinutes, "delivery_rates": &q.DeliveryRates,
		"prune_delivery_minutes": &q.PruneDeliveryMinutes,
		"lock_transaction":       &q.LockTransaction,
		"migrations_prepare":     &q.MigrationsPrepare, "migrations_applied": &q.MigrationsApplied,
		"migrations_record": &q.MigrationsRecord, "migrations_ledger_exists": &q.MigrationsLedgerExists,
		"set_search_path": &q.SetSearchPath,
		"active_routes":   &q.ActiveRoutes, "applied_target": &q.AppliedTarget, "apply_routes": &q.ApplyRoutes,
	} {
		*dst = qualify(ident, statement(file))
	}
	return q
}

// statement returns the text of sql/<name>.sql, named by a first line
// "-- name: <name>" (the convention of sqlc, which River follows), so the
// statement can be told apart in pg_stat_activity, pg_stat_statements and
// logs. A missing file is a programming error that every test run catches
// at once.
func statement(name string) string {
	b, err := statementFiles.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("outbox: embedded statement %s: %v", name, err))
	}
	return statementName(name) + string(b)
}

// statementName is the first line of the statement called name.
func statementName(name string) string { return "-- name: " + name + "\n" }

// qualify replaces the {schema} placeholder of a query with the quoted schema.
func qualify(ident, query string) string {
	return strings.ReplaceAll(query, "{schema}", ident)
}

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

// enqueueBatchSQL is the multi-row form of sql/enqueue.sql for one shape:
// the columns arrive as arrays, so the statement is the same whatever the
// batch size. Rows are inserted in the order of the arrays, so ids follow
// the batch's order (which per-key ordering relies on). It wakes a relay
// loop waiting for each sink of the rows it created (wake(), migration 006).
//
// With skipDuplicates the statement returns the id, sink and dedup key of
// the rows it created, and EnqueueBatch looks up the ids of the duplicates
// afterwards, only when there are any. Without, a duplicate fails the
// statement and it returns every new id.
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
	onConflict, returning := "", "ins.id"
	if skipDuplicates {
		onConflict, returning = "ON CONFLICT (sink, dedup_key) DO NOTHING", "ins.id, ins.sink, ins.dedup_key"
	}
	return fmt.Sprintf(statementName("enqueue_batch")+`
WITH ins AS (
    INSERT INTO {schema}.messages (%[1]s)
    SELECT %[2]s
    FROM unnest(%[3]s) WITH ORDINALITY AS t(%[1]s, ord)
    ORDER BY ord
    %[4]s
    RETURNING id, sink, dedup_key
), wake AS (
    SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM ins) s
)
SELECT %[5]s FROM ins CROSS JOIN (SELECT count(*) FROM wake) w`,
		strings.Join(columns, ", "), strings.Join(values, ", "), strings.Join(arrays, ", "), onConflict, returning)
}

// Statement returns sql/<name>.sql with the schema filled in: the text the
// server sees, for the EXPLAIN tests and the benchmarks.
func (q *Queries) Statement(name string) string { return qualify(q.Ident, statement(name)) }

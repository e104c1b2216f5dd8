package core

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

// queries holds every statement of one outbox, with its schema filled in.
// They are built once per Outbox.
type queries struct {
	ident string // the quoted schema name

	enqueue, lookupID, lookupIDs string
	publish, publishBatch        string
	// enqueueBatch skips duplicates (ON CONFLICT DO NOTHING);
	// enqueueBatchPlain fails on the first one.
	enqueueBatch, enqueueBatchPlain [batchShapes]string

	claim, finish                           string
	reservePermits, pauseSink, activePauses string
	pruneSent, unconfiguredSinks            string
	waitingRows                             string
	registerWaiter, unregisterWaiters       string
	pruneWaiters                            string
	pruneThreads, pruneKeyLimits            string
	foldDroppedEvents, droppedEvents        string
	reserveKeyPermits                       string

	stats, deadLetters, redrive, purge string

	message, messagesSearch                     string
	pauseSinkByHand, resumeSink, sinkPauses     string
	takeStatsLead, takeStatsSnapshot, statsSnap string
	addDeliveryMinutes, deliveryRates           string
	pruneDeliveryMinutes                        string

	lockSession, unlockSession, lockTransaction string
	migrationsPrepare, migrationsApplied        string
	migrationsRecord, migrationsLedgerExists    string
	setSearchPath                               string
}

func newQueries(ident string) queries {
	q := queries{ident: ident}
	for shape := range batchShape(batchShapes) {
		q.enqueueBatch[shape] = qualify(ident, enqueueBatchSQL(shape, true))
		q.enqueueBatchPlain[shape] = qualify(ident, enqueueBatchSQL(shape, false))
	}
	for file, dst := range map[string]*string{
		"enqueue": &q.enqueue, "lookup_id": &q.lookupID, "lookup_ids": &q.lookupIDs,
		"publish": &q.publish, "publish_batch": &q.publishBatch,
		"claim": &q.claim, "finish": &q.finish,
		"reserve_permits": &q.reservePermits, "pause_sink": &q.pauseSink, "active_pauses": &q.activePauses,
		"prune_sent": &q.pruneSent, "unconfigured_sinks": &q.unconfiguredSinks, "waiting_rows": &q.waitingRows,
		"register_waiter": &q.registerWaiter, "unregister_waiters": &q.unregisterWaiters, "prune_waiters": &q.pruneWaiters,
		"prune_threads": &q.pruneThreads, "prune_key_limits": &q.pruneKeyLimits,
		"fold_dropped_events": &q.foldDroppedEvents, "dropped_events": &q.droppedEvents,
		"reserve_key_permits": &q.reserveKeyPermits,
		"stats":               &q.stats, "dead_letters": &q.deadLetters, "redrive": &q.redrive, "purge": &q.purge,
		"message": &q.message, "messages_search": &q.messagesSearch,
		"pause_sink_by_hand": &q.pauseSinkByHand, "resume_sink": &q.resumeSink, "sink_pauses": &q.sinkPauses,
		"take_stats_lead": &q.takeStatsLead, "take_stats_snapshot": &q.takeStatsSnapshot, "stats_snapshot": &q.statsSnap,
		"add_delivery_minutes": &q.addDeliveryMinutes, "delivery_rates": &q.deliveryRates,
		"prune_delivery_minutes": &q.pruneDeliveryMinutes,
		"lock_session":           &q.lockSession, "unlock_session": &q.unlockSession, "lock_transaction": &q.lockTransaction,
		"migrations_prepare": &q.migrationsPrepare, "migrations_applied": &q.migrationsApplied,
		"migrations_record": &q.migrationsRecord, "migrations_ledger_exists": &q.migrationsLedgerExists,
		"set_search_path": &q.setSearchPath,
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

// batchShape says which optional columns a batch enqueue sends: a bit per
// entry of optionalBatchColumns. A column no message of the batch sets is
// left out of the statement and takes its default: every array PostgreSQL
// unpacks costs, and a batch of plain messages (the common case) enqueued
// ~25% slower when it shipped four arrays of NULLs and empty objects.
type batchShape uint8

// batchShapes is the number of shapes: every subset of the optional columns.
const batchShapes = 1 << len(optionalBatchColumns)

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
func enqueueBatchSQL(shape batchShape, skipDuplicates bool) string {
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

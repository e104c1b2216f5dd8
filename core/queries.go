package core

import (
	"fmt"
	"strings"
)

// queries holds every SQL statement of one outbox, with its schema filled in.
// They are built once per Outbox; nothing user-supplied is ever spliced in
// except the schema identifier, which New validates and quotes.
type queries struct {
	ident string // the quoted schema name

	enqueue, lookupID, lookupIDs string
	// enqueueBatch skips duplicates (ON CONFLICT DO NOTHING);
	// enqueueBatchPlain fails on the first one.
	enqueueBatch, enqueueBatchPlain [batchShapes]string
	claimAll, claimSink             string
	finish                          string

	reservePermits, pauseSink, activePauses string
	pruneSent                               string
}

func newQueries(ident string) queries {
	q := queries{ident: ident}
	q.enqueue = qualify(ident, sqlEnqueue)
	for shape := range batchShape(batchShapes) {
		q.enqueueBatch[shape] = qualify(ident, enqueueBatchSQL(shape, true))
		q.enqueueBatchPlain[shape] = qualify(ident, enqueueBatchSQL(shape, false))
	}
	q.lookupIDs = qualify(ident, sqlLookupIDs)
	q.lookupID = qualify(ident, `SELECT id FROM {schema}.messages WHERE sink = $1 AND dedup_key = $2`)
	q.claimAll = qualify(ident, strings.ReplaceAll(sqlClaim, "{sink_filter}", "NOT (sink = ANY($3::text[]))"))
	q.claimSink = qualify(ident, strings.ReplaceAll(sqlClaim, "{sink_filter}", "sink = ($3::text[])[1]"))
	q.finish = qualify(ident, sqlFinish)
	q.pruneSent = qualify(ident, sqlPruneSent)
	q.reservePermits = qualify(ident, sqlReservePermits)
	q.pauseSink = qualify(ident, sqlPauseSink)
	q.activePauses = qualify(ident, `SELECT sink, paused_until - now() FROM {schema}.sink_limits WHERE paused_until > now()`)
	return q
}

// sqlEnqueue inserts one message and wakes relays in the same statement.
// pg_notify is transactional: the wake-up is delivered on commit, and
// PostgreSQL folds identical notifications of one transaction into one, so a
// bulk enqueue does not cause a notify storm.
const sqlEnqueue = `
WITH ins AS (
    INSERT INTO {schema}.messages (sink, dedup_key, payload, headers, ordering_key, max_attempts, available_at)
    VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, now()))
    ON CONFLICT (sink, dedup_key) DO NOTHING
    RETURNING id
), wake AS (
    SELECT pg_notify($8, '') FROM ins LIMIT 1
)
SELECT ins.id FROM ins LEFT JOIN wake ON true`

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

// enqueueBatchSQL is the multi-row form of sqlEnqueue for one shape: the
// columns arrive as arrays, so the statement is the same whatever the batch
// size. Rows are inserted in the order of the arrays, so ids follow the
// batch's order (which per-key ordering relies on). The last parameter is
// the notification channel.
//
// With skipDuplicates the statement returns the id, sink and dedup key of
// the rows it created, and EnqueueBatch looks up the ids of the duplicates
// afterwards, only when there are any. Without, a duplicate fails the
// statement and it returns every new id.
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
	onConflict, returning := "", "id"
	if skipDuplicates {
		onConflict, returning = "ON CONFLICT (sink, dedup_key) DO NOTHING", "id, sink, dedup_key"
	}
	return fmt.Sprintf(`
WITH ins AS (
    INSERT INTO {schema}.messages (%[1]s)
    SELECT %[2]s
    FROM unnest(%[3]s) WITH ORDINALITY AS t(%[1]s, ord)
    ORDER BY ord
    %[5]s
    RETURNING %[6]s
), wake AS (
    SELECT pg_notify($%[4]d, '') FROM ins LIMIT 1
)
SELECT ins.* FROM ins LEFT JOIN wake ON true`,
		strings.Join(columns, ", "), strings.Join(values, ", "), strings.Join(arrays, ", "), len(arrays)+1, onConflict, returning)
}

// sqlLookupIDs finds the ids of existing rows by (sink, dedup key) pairs.
const sqlLookupIDs = `
SELECT m.id, m.sink, m.dedup_key
FROM unnest($1::text[], $2::text[]) AS k(sink, dedup_key)
JOIN {schema}.messages m ON m.sink = k.sink AND m.dedup_key = k.dedup_key`

// sqlClaim claims up to $1 rows in one statement: ready rows (pending, or
// failed and due) in available_at order, plus rows whose lease expired (their
// relay died or overran). Each gets lease token $4, a lease of $2 on the
// database clock, and attempts+1 at claim time, so a message that crashes its
// relay still runs out of attempts. A row with an ordering key is only ready
// when no earlier row of its key is unfinished. It returns whether the row
// was reclaimed from an expired lease (its previous outcome is unknown).
// Sinks paused by a Retry-After are skipped on the database's word, so a
// relay that has not heard of the pause yet cannot claim their rows.
const sqlClaim = `
WITH ready AS (
    SELECT id, status FROM {schema}.messages m
    WHERE status IN ('pending', 'failed') AND available_at <= now()
      AND {sink_filter}
      AND NOT EXISTS (SELECT 1 FROM {schema}.sink_limits l WHERE l.sink = m.sink AND l.paused_until > now())
      AND (ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM {schema}.messages e
            WHERE e.ordering_key = m.ordering_key AND e.id < m.id
              AND e.status IN ('pending', 'in_progress', 'failed')))
    ORDER BY available_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT id, status FROM {schema}.messages m
    WHERE status = 'in_progress' AND lease_expires_at <= now()
      AND {sink_filter}
      AND NOT EXISTS (SELECT 1 FROM {schema}.sink_limits l WHERE l.sink = m.sink AND l.paused_until > now())
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), picked AS (
    SELECT id, status FROM ready UNION ALL SELECT id, status FROM expired
)
UPDATE {schema}.messages m
SET status = 'in_progress', attempts = m.attempts + 1, lease_token = $4,
    lease_expires_at = now() + $2::interval, updated_at = now()
FROM picked
WHERE m.id = picked.id
  -- Spelled out so the planner probes the primary key for the picked ids
  -- instead of hash-joining them against a scan of the whole table.
  AND m.id = ANY(ARRAY(SELECT id FROM picked))
RETURNING m.id, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key,
          m.attempts, m.max_attempts, m.created_at, picked.status = 'in_progress'`

// sqlFinish writes a batch of outcomes in one statement. The lease token
// guard makes a late completion from a relay whose lease expired (a zombie)
// change nothing: the row was re-claimed under a new token. With $8
// (Config.DeleteOnSent) delivered rows are deleted instead of updated. A token is only
// ever set on in_progress rows (a CHECK constraint holds it), so the token
// test is the status test; spelling out status = 'in_progress' as well can
// lead the planner to walk the lease index instead of the primary key. Failed attempts
// are recorded for operators; a RetryAfter gives its attempt back.
const sqlFinish = `
WITH f AS (
    SELECT * FROM unnest($1::bigint[], $2::uuid[], $3::text[], $4::float8[], $5::text[], $6::jsonb[], $7::int[])
        AS t(id, token, status, delay_seconds, error, receipt, refund)
), deleted AS (
    DELETE FROM {schema}.messages m USING f
    WHERE $8 AND f.status = 'sent' AND m.id = f.id AND m.lease_token = f.token
    RETURNING m.id, m.attempts
), deleted_errors AS (
    DELETE FROM {schema}.failed_attempts
    WHERE message_id IN (SELECT id FROM deleted WHERE attempts > 1)
), done AS (
    UPDATE {schema}.messages m
    SET status = f.status,
        attempts = m.attempts - f.refund,
        available_at = CASE WHEN f.status IN ('failed', 'pending') THEN now() + f.delay_seconds * interval '1 second' ELSE m.available_at END,
        sent_at = CASE WHEN f.status = 'sent' THEN now() END,
        last_error = COALESCE(f.error, m.last_error),
        receipt = COALESCE(f.receipt, m.receipt),
        lease_token = NULL, lease_expires_at = NULL, updated_at = now()
    FROM f
    WHERE m.id = f.id AND m.lease_token = f.token AND NOT ($8 AND f.status = 'sent')
    RETURNING m.id, m.attempts, f.error, f.refund
), recorded AS (
    -- Reads the outcome back from RETURNING: joining done to f again would
    -- be a nested loop over two CTE scans, quadratic in the batch size.
    INSERT INTO {schema}.failed_attempts (message_id, attempt, error)
    SELECT id, attempts, error FROM done
    WHERE error IS NOT NULL AND refund = 0
)
SELECT id FROM done UNION ALL SELECT id FROM deleted`

// sqlReservePermits moves a sink's GCRA state n intervals ($3) forward and
// returns the base time of the first permit, the database's now and any
// pause. A sink idle for a while starts from now, not from its stale tat.
const sqlReservePermits = `
INSERT INTO {schema}.sink_limits AS l (sink, tat) VALUES ($1, now() + $2 * $3::interval)
ON CONFLICT (sink) DO UPDATE SET tat = GREATEST(l.tat, now()) + $2 * $3::interval
RETURNING tat - $2 * $3::interval, now(), paused_until`

// sqlPauseSink records a cluster-wide pause of sink for $2 and tells every
// relay with a notification.
const sqlPauseSink = `
WITH p AS (
    INSERT INTO {schema}.sink_limits AS l (sink, tat, paused_until) VALUES ($1, now() + $2::interval, now() + $2::interval)
    ON CONFLICT (sink) DO UPDATE
    SET paused_until = GREATEST(l.paused_until, now() + $2::interval),
        tat = GREATEST(l.tat, now() + $2::interval)
    RETURNING 1
)
SELECT pg_notify($3, $4) FROM p`

// sqlPruneSent deletes up to $2 sent rows older than $1, oldest first (the
// sent_at index serves the scan), with their recorded failed attempts.
const sqlPruneSent = `
WITH gone AS (
    DELETE FROM {schema}.messages
    WHERE id IN (
        SELECT id FROM {schema}.messages
        WHERE status = 'sent' AND sent_at < now() - $1::interval
        ORDER BY sent_at
        LIMIT $2)
    RETURNING id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone`

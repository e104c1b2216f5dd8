-- A page of messages, newest first: at most $7 rows with ids below $6 (the
-- cursor; NULL starts at the newest), of sink $1, status $2 and dedup key
-- $3 unless those are '', created in [$4, $5) unless those are NULL.
-- Run as a statement planned with its values (core's oneShot), so the
-- tests on '' and NULL fold away: a (sink, dedup key) probes the unique
-- index; a status also names its phase, so dead and sent walk their
-- partial index and the others the open one; the rest walk the primary
-- key backwards from the cursor, stopping after $7 matches. A time range
-- is a filter on that walk (ids follow created_at closely).
SELECT id, sink, dedup_key, status, attempts, created_at, updated_at, sent_at, COALESCE(last_error, '')
FROM {schema}.messages
WHERE ($1 = '' OR sink = $1) AND ($3 = '' OR dedup_key = $3)
  AND ($2 = '' OR (status = $2 AND phase = CASE WHEN $2 IN ('sent', 'dead') THEN $2 ELSE 'open' END))
  AND ($4::timestamptz IS NULL OR created_at >= $4) AND ($5::timestamptz IS NULL OR created_at < $5)
  AND ($6::bigint IS NULL OR id < $6)
ORDER BY id DESC
LIMIT $7

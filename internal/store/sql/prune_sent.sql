-- name: prune_sent :one
-- params: older_than, limit bigint
-- returns: moved bigint
-- Empties the hot table of the sent rows stored before migration 013
-- (delivered rows now move to messages_history as they are delivered):
-- up to $2 of them, oldest first (the sent_at index serves the scan), move
-- to the current history slot with a key each, except those sent longer
-- ago than $1, which retention deletes with their recorded failed attempts.
-- Returns how many rows left messages; none once the table is clean.
WITH gone AS (
    DELETE FROM {schema}.messages
    WHERE id IN (
        SELECT id FROM {schema}.messages
        WHERE phase = 'sent'
        ORDER BY sent_at
        LIMIT $2)
    RETURNING *
), kept AS (
    SELECT * FROM gone WHERE sent_at >= now() - $1::interval
), history AS (
    INSERT INTO {schema}.messages_history (slot, id, sink, dedup_key, payload, headers, ordering_key, attempts, max_attempts,
        deferrals, available_at, last_error, receipt, created_at, updated_at, sent_at, route, thread_key, route_version)
    SELECT (SELECT s.slot FROM {schema}.history_slots s WHERE s.state = 'current'), id, sink, dedup_key, payload, headers,
           ordering_key, attempts, max_attempts, deferrals, available_at, last_error, receipt, created_at, updated_at,
           sent_at, route, thread_key, route_version
    FROM kept
), keyed AS (
    INSERT INTO {schema}.message_keys (sink, dedup_key, id)
    SELECT sink, dedup_key, id FROM kept
    ON CONFLICT (sink, dedup_key) DO NOTHING
), expired AS (
    -- Past retention: gone for good, with its key if it had one.
    DELETE FROM {schema}.message_keys k USING gone g
    WHERE g.sent_at < now() - $1::interval AND k.sink = g.sink AND k.dedup_key = g.dedup_key AND k.id = g.id
), errs AS (
    DELETE FROM {schema}.failed_attempts
    WHERE message_id IN (SELECT id FROM gone WHERE sent_at < now() - $1::interval)
)
SELECT count(*) FROM gone

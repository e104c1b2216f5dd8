-- name: prune_sent :one
-- params: older_than, limit bigint
-- returns: deleted bigint
-- Deletes up to $2 sent rows older than $1, oldest first (the sent_at index
-- serves the scan), with their recorded failed attempts. Returns how many.
WITH gone AS (
    DELETE FROM {schema}.messages
    WHERE id IN (
        SELECT id FROM {schema}.messages
        WHERE phase = 'sent' AND sent_at < now() - $1::interval
        ORDER BY sent_at
        LIMIT $2)
    RETURNING id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone

-- name: prune_threads :one
-- params: older_than, limit bigint
-- returns: deleted bigint
-- Deletes up to $2 threads (migration 003) whose last row was delivered
-- more than $1 ago, oldest first; a later event of such a key starts a new
-- conversation. Returns how many.
WITH gone AS (
    DELETE FROM {schema}.threads
    WHERE (sink, thread_key) IN (
        SELECT sink, thread_key FROM {schema}.threads
        WHERE last_sent_at < now() - $1::interval
        ORDER BY last_sent_at
        LIMIT $2)
    RETURNING 1
)
SELECT count(*) FROM gone

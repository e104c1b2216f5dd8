-- name: prune_audit :one
-- params: older_than, limit bigint
-- returns: deleted bigint
-- Deletes up to $2 audit entries (migration 014) recorded more than $1
-- ago, oldest first: the audit trail is kept as long as delivered
-- messages. Returns how many.
WITH gone AS (
    DELETE FROM {schema}.audit_log
    WHERE id IN (
        SELECT id FROM {schema}.audit_log
        WHERE at < now() - $1::interval
        ORDER BY at
        LIMIT $2)
    RETURNING 1
)
SELECT count(*) FROM gone

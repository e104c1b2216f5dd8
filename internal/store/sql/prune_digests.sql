-- name: prune_digests :one
-- params: older_than, limit bigint
-- returns: deleted bigint
-- Deletes up to $2 digests (migration 018) recorded more than $1 ago,
-- oldest first, once none of their members is left in messages (open or
-- dead): a lookup still names the digest of a member that has not gone to
-- history. Returns how many.
WITH gone AS (
    DELETE FROM {schema}.digests
    WHERE id IN (
        SELECT d.id FROM {schema}.digests d
        WHERE d.created < now() - $1::interval
          AND NOT EXISTS (SELECT 1 FROM {schema}.messages m WHERE m.digest_id = d.id)
        ORDER BY d.created
        LIMIT $2)
    RETURNING 1
)
SELECT count(*) FROM gone

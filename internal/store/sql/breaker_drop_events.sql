-- name: breaker_drop_events :exec
-- params: ids bigint[] as []int64, sink text
-- Deletes the rows publishing a breaker's event created for the unhealthy
-- sink $2 itself (ids $1), with their keys (migration 013): the news that a
-- receiver is down cannot go to that receiver, and must not wait there for
-- its recovery.
WITH gone AS (
    DELETE FROM {schema}.messages WHERE id = ANY($1) AND sink = $2
    RETURNING id, sink, dedup_key
)
DELETE FROM {schema}.message_keys k USING gone g
WHERE k.sink = g.sink AND k.dedup_key = g.dedup_key AND k.id = g.id

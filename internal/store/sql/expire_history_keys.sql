-- name: expire_history_keys :one
-- params: slot integer as int32, after bigint, limit bigint
-- returns: last_id bigint, rows bigint
-- Deletes the keys and recorded failed attempts of up to $3 rows of expiring
-- history slot $1 with ids above $2, in id order (the partition's id
-- index), before the slot is truncated: its rows then stop deduplicating.
-- A key is deleted only while it names that row. Returns the last id seen
-- (the next batch's $2; $2 when none) and how many rows the batch held.
WITH batch AS (
    SELECT h.id, h.sink, h.dedup_key FROM {schema}.messages_history h
    WHERE h.slot = $1 AND h.id > $2
    ORDER BY h.id
    LIMIT $3
), unkeyed AS (
    DELETE FROM {schema}.message_keys k USING batch b
    WHERE k.sink = b.sink AND k.dedup_key = b.dedup_key AND k.id = b.id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM batch)
)
SELECT COALESCE(max(id), $2), count(*) FROM batch

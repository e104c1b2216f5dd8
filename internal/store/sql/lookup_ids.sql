-- name: lookup_ids :many
-- params: sinks, dedup_keys
-- returns: id bigint, sink text, dedup_key text
-- The ids of existing rows by (sink, dedup key) pairs: $1 sinks, $2 keys.
-- Their keys (migration 013), else for a row stored before 013 without one
-- the row in messages.
SELECT COALESCE(mk.id, m.id), k.sink, k.dedup_key
FROM unnest($1::text[], $2::text[]) AS k(sink, dedup_key)
LEFT JOIN {schema}.message_keys mk ON mk.sink = k.sink AND mk.dedup_key = k.dedup_key
LEFT JOIN {schema}.messages m ON mk.id IS NULL AND m.sink = k.sink AND m.dedup_key = k.dedup_key
WHERE mk.id IS NOT NULL OR m.id IS NOT NULL

-- name: lookup_ids :many
-- params: sinks, dedup_keys
-- returns: id bigint, sink text, dedup_key text
-- The ids of existing rows by (sink, dedup key) pairs: $1 sinks, $2 keys.
SELECT m.id, m.sink, m.dedup_key
FROM unnest($1::text[], $2::text[]) AS k(sink, dedup_key)
JOIN {schema}.messages m ON m.sink = k.sink AND m.dedup_key = k.dedup_key

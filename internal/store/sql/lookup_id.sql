-- name: lookup_id :one
-- params: sink text, dedup_key text
-- returns: id bigint
-- The id of the row stored under (sink $1, dedup key $2).
SELECT id FROM {schema}.messages WHERE sink = $1 AND dedup_key = $2

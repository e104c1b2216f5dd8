-- name: lookup_id :one
-- params: sink text, dedup_key text
-- returns: id bigint
-- The id of the row stored under (sink $1, dedup key $2), open, dead or
-- delivered: its key (migration 013's message_id()).
SELECT id FROM {schema}.message_id($1, $2) AS id WHERE id IS NOT NULL

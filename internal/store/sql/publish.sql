-- name: publish :many
-- params: event_type text, key text, data jsonb, ordering_key text, thread_key text, headers jsonb
-- returns: sink text, id bigint, created boolean
-- Publishes one event through the publish() function of migration 003:
-- $1 type, $2 key, $3 data, $4 ordering key, $5 thread key ('' for none),
-- $6 headers (trace context, NULL for none). Returns each target's row.
SELECT sink, id, created FROM {schema}.publish($1, $2, $3, $4, $5, $6)

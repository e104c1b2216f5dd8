-- name: publish_batch :many
-- params: event_types, keys, data, ordering_keys, thread_keys, headers
-- returns: event integer as int, sink text, id bigint, created boolean
-- Publishes a batch of events in one call of the publish_batch() function of
-- migration 003: $1 types, $2 keys, $3 data, $4 ordering keys, $5 thread
-- keys ('' for none), $6 the headers of them all (trace context, NULL for
-- none). Returns every target's row with the index (from 1) of its event,
-- in event order, then in each event's route order.
SELECT event, sink, id, created
FROM {schema}.publish_batch($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::jsonb)

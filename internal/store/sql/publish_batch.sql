-- name: publish_batch :many
-- params: event_types, keys, data, ordering_keys, thread_keys, headers
-- returns: event integer as int, sink text, id bigint, created boolean, fans_out boolean
-- Publishes a batch of events in one call of the publish_batch() function of
-- migration 003: $1 types, $2 keys, $3 data, $4 ordering keys, $5 thread
-- keys ('' for none), $6 the headers of them all (trace context, NULL for
-- none). Returns every target's row with the index (from 1) of its event,
-- in event order, then in each event's route order, and whether the row's
-- sink is one a target with a tenant sends to, as publish.sql says.
SELECT p.event, p.sink, p.id, p.created,
       p.sink = ANY(ARRAY(SELECT rt.sink FROM {schema}.routes_active a
                          JOIN {schema}.route_targets rt ON rt.version = a.version
                          WHERE rt.tenant IS NOT NULL))
FROM {schema}.publish_batch($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::jsonb) p

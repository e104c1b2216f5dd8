-- name: publish :many
-- params: event_type text, key text, data jsonb, ordering_key text, thread_key text, headers jsonb
-- returns: sink text, id bigint, created boolean, fans_out boolean
-- Publishes one event through the publish() function of migration 003:
-- $1 type, $2 key, $3 data, $4 ordering key, $5 thread key ('' for none),
-- $6 headers (trace context, NULL for none). Returns each target's row,
-- and whether its sink is one a target with a tenant of the applied routes
-- sends to (migration 016): then the row may be a routed row whose
-- fan-out to the tenant's destinations destination_fan_outs.sql reads. The
-- routes are read once, as this statement's snapshot has them (a route
-- change committed while publish() runs can make the answer stale for
-- that one publish); no row is read: publish()'s rows are not visible to
-- this statement's own snapshot.
SELECT p.sink, p.id, p.created,
       p.sink = ANY(ARRAY(SELECT rt.sink FROM {schema}.routes_active a
                          JOIN {schema}.route_targets rt ON rt.version = a.version
                          WHERE rt.tenant IS NOT NULL))
FROM {schema}.publish($1, $2, $3, $4, $5, $6) p

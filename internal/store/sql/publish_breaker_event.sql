-- name: publish_breaker_event :many
-- params: event_type text, key text, data jsonb
-- returns: sink text, id bigint, created boolean
-- Publishes a circuit breaker's event (@event_type, outboxd.destination.*,
-- key @key, data @data) through publish() when a route of the applied
-- version matches its type, and publishes nothing otherwise: a breaker
-- opens or closes whether or not a route wants the news, where publish()
-- itself refuses an event no route matches (routes_unmatched: error) or
-- an outbox with no routes applied. Returns each target's row.
SELECT p.sink, p.id, p.created
FROM (SELECT @event_type::text AS type
      FROM {schema}.routes_active a
      WHERE cardinality((SELECT r.routes FROM {schema}.route_match(a.version, @event_type::text) r)) > 0) routed
CROSS JOIN LATERAL {schema}.publish(routed.type, @key::text, @data::jsonb) p

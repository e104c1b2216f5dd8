-- name: event_routed :one
-- params: event_type text
-- returns: routed boolean
-- Reports whether a route of the applied version matches event type $1,
-- so that a circuit breaker's event (outboxd.destination.*) is published
-- only when some route wants it: publish() refuses an event no route
-- matches (routes_unmatched: error) or an outbox with no routes applied,
-- and a breaker opens or closes whether or not anyone listens.
SELECT EXISTS (
    SELECT FROM {schema}.routes_active a
    WHERE cardinality((SELECT r.routes FROM {schema}.route_match(a.version, $1) r)) > 0)

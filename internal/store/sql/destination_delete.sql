-- name: destination_delete :one
-- params: tenant text, id text, channel text, pause_prefix text
-- returns: deleted bigint, rows bigint
-- Deletes destination $2 of tenant $1, its secrets (cascade), its rows
-- still waiting for delivery (open, not in flight), found on
-- messages_destination_idx, and its circuit breakers, whose end
-- notification $4 || <sink> on $3 tells every relay. Returns whether the
-- destination existed and how many rows went with it.
WITH gone AS (
    DELETE FROM {schema}.destinations WHERE tenant = $1 AND id = $2 RETURNING id
), rows AS (
    DELETE FROM {schema}.messages m
    WHERE (m.headers->>'outboxd-destination') = $2 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
      AND m.status <> 'in_progress' AND EXISTS (SELECT FROM gone)
    RETURNING 1
), ended AS (
    DELETE FROM {schema}.destination_breakers b
    WHERE b.dest_key = $2 AND EXISTS (SELECT FROM gone)
    RETURNING b.sink
), told AS (
    SELECT count(*) FROM (SELECT pg_notify($3, $4 || e.sink) FROM ended e) x
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM rows) + 0 * (SELECT count(*) FROM told)

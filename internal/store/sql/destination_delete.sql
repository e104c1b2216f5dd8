-- name: destination_delete :one
-- params: tenant text, id text
-- returns: deleted bigint, rows bigint
-- Deletes destination $2 of tenant $1, its secrets (cascade) and its rows
-- still waiting for delivery (open, not in flight), found on
-- messages_destination_idx. Returns whether the destination existed and
-- how many rows went with it.
WITH gone AS (
    DELETE FROM {schema}.destinations WHERE tenant = $1 AND id = $2 RETURNING id
), rows AS (
    DELETE FROM {schema}.messages m
    WHERE (m.headers->>'outboxd-destination') = $2 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
      AND m.status <> 'in_progress' AND EXISTS (SELECT FROM gone)
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM rows)

-- name: destination_dead_rows :one
-- params: tenant text, id text, message bigint, limit bigint as int
-- returns: found bigint, ids bigint[]
-- Whether tenant $1 has destination $2 (1) or not (0), and the ids of
-- its dead rows, oldest first, at most $4; only row $3 unless it is 0.
-- The rows are found through the tenant's destination, so what the
-- tenant portal redrives is always its own. Walks
-- messages_destination_all_idx (migration 016) for the destination.
WITH d AS (
    SELECT id FROM {schema}.destinations WHERE tenant = $1 AND id = $2
)
SELECT (SELECT count(*) FROM d),
       ARRAY(SELECT m.id FROM {schema}.messages m
             WHERE (m.headers->>'outboxd-destination') = (SELECT id FROM d) AND m.headers ? 'outboxd-destination'
               AND m.phase = 'dead'
               AND ($3::bigint = 0 OR m.id = $3)
             ORDER BY m.id
             LIMIT $4)

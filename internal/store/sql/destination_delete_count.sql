-- name: destination_delete_count :one
-- params: tenant text, id text
-- returns: rows bigint, digest text
-- What deleting destination $2 of tenant $1 would take: its rows waiting
-- for delivery (open, not in flight, as destination_delete deletes them),
-- counted on messages_destination_idx, and an md5 of their ids and the
-- destination's last change, which a confirmation compares so that it
-- deletes exactly what was counted. No row: no such destination.
SELECT count(m.id),
       md5(d.updated_at::text || ':' || coalesce(string_agg(m.id::text, ',' ORDER BY m.id), ''))
FROM {schema}.destinations d
LEFT JOIN {schema}.messages m
    ON (m.headers->>'outboxd-destination') = d.id AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
   AND m.status <> 'in_progress'
WHERE d.tenant = $1 AND d.id = $2
GROUP BY d.id, d.updated_at

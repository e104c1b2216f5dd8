-- name: stats :many
-- returns: sink text, status text, count bigint, oldest_waiting_seconds numeric as float64
-- Rows per sink and status, and per sink the age in seconds of the oldest
-- row waiting for delivery (pending or failed), on the database clock.
SELECT sink, status, count(*),
       COALESCE(extract(epoch FROM now() - min(created_at) FILTER (WHERE status IN ('pending', 'failed'))), 0)
FROM {schema}.messages GROUP BY sink, status

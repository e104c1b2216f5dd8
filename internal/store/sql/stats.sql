-- name: stats :many
-- returns: sink text, status text, count bigint, oldest_waiting_seconds numeric as float64
-- Rows per sink and status, and per sink the age in seconds of the oldest
-- row waiting for delivery (pending or failed), on the database clock.
-- Delivered rows are counted in messages_history (migration 013).
SELECT sink, status, count(*),
       COALESCE(extract(epoch FROM now() - min(created_at) FILTER (WHERE status IN ('pending', 'failed'))), 0)
FROM (SELECT sink, status, created_at FROM {schema}.messages
      UNION ALL
      SELECT sink, 'sent', created_at FROM {schema}.messages_history) m
GROUP BY sink, status

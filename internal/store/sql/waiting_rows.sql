-- name: waiting_rows :one
-- params: sink text, most bigint
-- returns: waiting bigint, oldest_waiting_seconds numeric as float64
-- How many rows of sink $1 wait for delivery (pending or failed), counting
-- at most $2, and the age in seconds of the oldest of those counted. Run
-- for the few sinks no relay is configured with, by every relay once a
-- minute: the bound keeps a large backlog of such a sink (a removed sink's
-- million rows) from costing each relay a core for seconds. The rows are
-- read through the sink's part of the open index in its order (by
-- available_at), so the oldest waiting rows are among those counted.
SELECT count(*), COALESCE(extract(epoch FROM now() - min(w.created_at)), 0)
FROM (SELECT m.created_at FROM {schema}.messages m
      -- sink IS NOT NULL: the open index's predicate (migration 012).
      WHERE m.sink = $1 AND m.sink IS NOT NULL AND m.phase = 'open' AND m.status IN ('pending', 'failed')
      ORDER BY m.queued_behind, m.available_at, m.id
      LIMIT $2) w

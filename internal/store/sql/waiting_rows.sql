-- name: waiting_rows :one
-- params: sink text
-- returns: waiting bigint, oldest_waiting_seconds numeric as float64
-- How many rows of sink $1 wait for delivery (pending or failed), and the
-- age in seconds of the oldest. Through the (sink, dedup_key) index: run
-- for the few sinks no relay is configured with, whose rows are few.
SELECT count(*), COALESCE(extract(epoch FROM now() - min(created_at)), 0)
FROM {schema}.messages
WHERE sink = $1 AND phase = 'open' AND status IN ('pending', 'failed')

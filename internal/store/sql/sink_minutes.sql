-- name: sink_minutes :many
-- params: sink text, span interval
-- returns: minute timestamptz, sent bigint, retried bigint, dead bigint
-- The per-minute delivery counts of sink $1 over the last $2 in whole
-- minutes (the current, unfinished minute included), oldest first, for a
-- sink's page: at most one row a minute of the span, read through the
-- primary key (sink, minute), so its cost never grows with history.
SELECT minute, sent, retried, dead
FROM {schema}.delivery_minutes
WHERE sink = $1 AND minute >= date_trunc('minute', now()) + interval '1 minute' - $2::interval
ORDER BY minute

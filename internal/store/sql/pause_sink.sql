-- name: pause_sink :exec
-- params: sink text, pause, channel text, payload text
-- Records a cluster-wide pause of sink $1 for $2 and tells every relay with
-- notification $4 on channel $3, only when it ends the pause later than
-- the one recorded: a storm of 429s writes and notifies once per change,
-- not once per answer. The GCRA clock moves past the pause too, so the
-- permits after it stay evenly spread.
WITH p AS (
    INSERT INTO {schema}.sink_limits AS l (sink, tat, paused_until) VALUES ($1, now() + $2::interval, now() + $2::interval)
    ON CONFLICT (sink) DO UPDATE
    SET paused_until = now() + $2::interval,
        tat = GREATEST(l.tat, now() + $2::interval)
    WHERE l.paused_until IS NULL OR l.paused_until < now() + $2::interval
    RETURNING 1
)
SELECT pg_notify($3, $4) FROM p

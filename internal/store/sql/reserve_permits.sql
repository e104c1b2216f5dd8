-- name: reserve_permits :one
-- params: sink text, count double precision as int, permit
-- returns: base timestamptz, now timestamptz, paused_until timestamptz null
-- Moves sink $1's GCRA state $2 permits of interval $3 forward and returns
-- the base time of the first permit, the database's now and any pause. A
-- sink idle for a while starts from now, not from its stale tat.
INSERT INTO {schema}.sink_limits AS l (sink, tat) VALUES ($1, now() + $2 * $3::interval)
ON CONFLICT (sink) DO UPDATE SET tat = GREATEST(l.tat, now()) + $2 * $3::interval
RETURNING tat - $2 * $3::interval, now(), paused_until

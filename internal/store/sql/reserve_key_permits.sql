-- name: reserve_key_permits :many
-- params: sink text, keys, counts as []int, permits
-- returns: key text, tat timestamptz, now timestamptz
-- Moves the GCRA state of each rate key $2[i] of sink $1 forward by $3[i]
-- permits of interval $4[i] (migration 003's sink_key_limits), in one
-- statement: each key has its own interval (a tenant's destination's own
-- rate_limit, else the sink's). Keys come sorted, so relays lock shared
-- keys in one order. Returns per key its new tat and the database's now:
-- the key's first permit starts at tat - n * interval. A key idle for a
-- while starts from now, not from its stale tat.
INSERT INTO {schema}.sink_key_limits AS l (sink, key, tat)
SELECT $1, k.key, now() + k.n * k.permit
FROM unnest($2::text[], $3::int[], $4::interval[]) AS k(key, n, permit)
ORDER BY k.key
ON CONFLICT (sink, key) DO UPDATE SET tat = GREATEST(l.tat, now()) + (excluded.tat - now())
RETURNING l.key, l.tat, now()

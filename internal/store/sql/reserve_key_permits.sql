-- name: reserve_key_permits :many
-- params: sink text, keys, counts as []int, permits, aheads
-- returns: key text, granted integer as int, tat timestamptz, now timestamptz
-- Takes up to $3[i] permits of interval $4[i] from the GCRA state of each
-- rate key $2[i] of sink $1 (migration 003's sink_key_limits), in one
-- statement: each key has its own interval (a tenant's destination's own
-- rate_limit, else the sink's). The rule is reserve_permits.sql's: only
-- the permits whose base time (the tat before the permit) is at most
-- $5[i] from now are granted, so a key's schedule never moves for a row
-- that cannot start within its relay's hold window (issue 40 item 3: a
-- permit taken for a row handed back was spent unused, and every claim of
-- a key at its limit pushed its next permit one interval further). Keys
-- come sorted, and their rows are locked in that order, so relays lock
-- shared keys in one order. Returns per key how many it granted, its new
-- tat (the first granted permit's base is tat - granted * interval, the
-- next permit's is tat) and the database's now. A key idle for a while
-- starts from now, not from its stale tat. As in reserve_permits.sql the
-- ON CONFLICT arm adds to the tat, for two relays creating a key's row at
-- once.
WITH k AS (
    SELECT k.key, k.n, k.permit, k.ahead
    FROM unnest($2::text[], $3::int[], $4::interval[], $5::interval[]) AS k(key, n, permit, ahead)
), cur AS MATERIALIZED (
    SELECT l.key, GREATEST(l.tat, now()) AS base FROM {schema}.sink_key_limits l
    WHERE l.sink = $1 AND l.key = ANY($2::text[])
    ORDER BY l.key
    FOR UPDATE
), g AS MATERIALIZED (
    SELECT k.key, k.permit, LEAST(k.n, GREATEST(0, floor(
               extract(epoch FROM now() + k.ahead - coalesce(c.base, now())) / extract(epoch FROM k.permit))::int + 1)) AS n
    FROM k LEFT JOIN cur c ON c.key = k.key
), up AS (
    INSERT INTO {schema}.sink_key_limits AS l (sink, key, tat)
    SELECT $1, g.key, now() + g.n * g.permit FROM g
    ORDER BY g.key
    ON CONFLICT (sink, key) DO UPDATE SET tat = GREATEST(l.tat, now()) + (excluded.tat - now())
    RETURNING l.key, l.tat
)
SELECT up.key, g.n, up.tat, now() FROM up JOIN g ON g.key = up.key

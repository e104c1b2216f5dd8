-- name: reserve_permits :one
-- params: sink text, count as int, permit, ahead
-- returns: granted integer as int, tat timestamptz, now timestamptz, paused_until timestamptz null
-- Takes up to @count permits of interval @permit from sink @sink's GCRA
-- state, but only those whose base time (the tat before the permit) is at
-- most @ahead from now: a relay asks for the permits it can use within its
-- hold window, and leaves the later ones to whichever relay claims when
-- they come due. None while the sink is paused. Returns how many it
-- granted, the new tat (the first granted permit's base is tat - granted *
-- permit, the next permit's is tat), the database's now and any pause. A
-- sink idle for a while starts from now, not from its stale tat. The state
-- is read FOR UPDATE, so concurrent reservations queue on the row and each
-- counts from the tat the one before left; the ON CONFLICT arm adds to
-- the tat as well, for two relays creating the sink's row at once.
WITH cur AS (
    SELECT GREATEST(tat, now()) AS base, paused_until FROM {schema}.sink_limits WHERE sink = @sink FOR UPDATE
), g AS (
    SELECT CASE WHEN c.paused_until > now() THEN 0
           ELSE LEAST(@count::int, GREATEST(0, floor(
                extract(epoch FROM now() + @ahead::interval - c.base) / extract(epoch FROM @permit::interval))::int + 1))
           END AS n
    FROM (SELECT base, paused_until FROM cur
          UNION ALL SELECT now(), NULL WHERE NOT EXISTS (SELECT 1 FROM cur)) c
), up AS (
    INSERT INTO {schema}.sink_limits AS l (sink, tat) SELECT @sink, now() + g.n * @permit::interval FROM g
    ON CONFLICT (sink) DO UPDATE SET tat = GREATEST(l.tat, now()) + (EXCLUDED.tat - now())
    RETURNING l.tat, l.paused_until
)
SELECT g.n, up.tat, now(), up.paused_until FROM up, g

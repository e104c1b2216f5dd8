-- name: passed_over :many
-- returns: sink text, available_at timestamptz
-- The oldest row of each sink of @sinks that the sink's bounded claims
-- pass over: ready for an attempt as claim.sql's walk judges it (not
-- queued behind its key, pending, failed and due, or leased with its
-- lease expired, and no earlier open row of its key), with an available_at
-- earlier than the sink's bound @before (aligned with @sinks). A sink
-- without such a row is left out.
--
-- A claim loop runs it beside its claims, on a connection of its own,
-- while a full claim would be slow (see relay's claimBounds): it reads
-- what a full claim reads, every entry the open index still holds before
-- the bound, which a transaction held open keeps from vacuum (60,000
-- after half a minute at 2,000 messages a second). Run as a claim, that
-- walk held the loop, and every row committed meanwhile waited for it.
-- It locks nothing and changes nothing: the loop's next claim starts the
-- sink's walk at the row found, and takes it unless another relay did.
SELECT s.sink, r.available_at
FROM unnest(@sinks::text[], @before::timestamptz[]) AS s(sink, before)
CROSS JOIN LATERAL (
    -- sink IS NOT NULL: the open index's predicate (migration 012).
    SELECT m.available_at FROM {schema}.messages m
    WHERE m.sink = s.sink AND m.sink IS NOT NULL AND m.phase = 'open'
      AND m.queued_behind = false AND m.available_at <= now() AND m.available_at < s.before
      AND (m.status <> 'in_progress' OR m.lease_expires_at <= now())
      AND (m.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM {schema}.messages e
            WHERE e.ordering_key = m.ordering_key AND e.id + 0 < m.id AND e.phase = 'open'))
    ORDER BY m.available_at, m.id
    LIMIT 1
) r

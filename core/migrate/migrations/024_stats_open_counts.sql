-- One sink's open rows, as the stats snapshot counts them
-- (take_stats_snapshot.sql), read through the sink's part of the open
-- index and nothing else. The snapshot used to count each sink in a
-- lateral subquery of its own statement; there the sink is a value of
-- the running query, unknown to the planner, which then estimates a
-- sink's share of the open rows as all of them over the number of sinks
-- (a million beside three sinks of a million each) and plans a sequential
-- scan of the whole table. Beside 3M waiting rows of large backlogs,
-- whose counts the snapshot keeps (migration 022), counting a new sink's
-- 20,000 rows read all 3M rows, half a second of a core at every
-- snapshot, taken from the claims (docs/performance.md, "Issue 22 on a
-- quiet machine"). In a function of its own, its plan may not read the
-- table whole, and it gathers the sink's rows through an index in the
-- table's order (a bitmap scan) whatever the caller's settings: the
-- relay's connections turn bitmap scans off for its claims
-- (store.RelaySession), and an index scan in the order of an index would
-- visit the rows of a large sink in random order.
CREATE FUNCTION open_row_counts(p_sink text)
RETURNS TABLE (pending bigint, in_progress bigint, failed bigint, waiting_disabled bigint, oldest timestamptz)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
SET enable_seqscan = off
SET enable_bitmapscan = on
AS $fn$
    SELECT count(*) FILTER (WHERE m.status = 'pending'),
           count(*) FILTER (WHERE m.status = 'in_progress'),
           count(*) FILTER (WHERE m.status = 'failed'),
           count(*) FILTER (WHERE m.available_at = 'infinity' AND m.status IN ('pending', 'failed')
                            AND m.headers ? 'outboxd-destination'),
           min(m.created_at) FILTER (WHERE m.status IN ('pending', 'failed') AND m.available_at <> 'infinity')
    -- sink IS NOT NULL: the open index's predicate (migration 012).
    FROM messages m WHERE m.sink = p_sink AND m.phase = 'open' AND m.sink IS NOT NULL
$fn$;

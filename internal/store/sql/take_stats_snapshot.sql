-- name: take_stats_snapshot :exec
-- params: sent_window, by text
-- Recomputes sink_stats from what is cheap to count: the open rows
-- (pending, in progress, failed) through the open index, dead rows through
-- the dead index and the rows sent in the last $1 through the sent_at index
-- of messages_history (and messages' sent index, for rows stored before
-- migration 013). Of the pending and failed rows, those of a disabled
-- destination (due at infinity, migration 021) are counted apart too, and
-- left out of the oldest waiting row: they wait by the operator's will,
-- not because delivery is behind.
-- Older delivered history is never read. Each part is one GROUP BY over a
-- partial index's rows; the predicates repeat the indexes' own (on phase)
-- so the planner can use them. Sinks left with no such rows are removed,
-- and the time of the snapshot is recorded with the lead ($2 takes it when
-- no relay holds it).
WITH parts AS (
    SELECT sink, count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'in_progress') AS in_progress,
           count(*) FILTER (WHERE status = 'failed') AS failed, 0::bigint AS dead, 0::bigint AS sent,
           count(*) FILTER (WHERE available_at = 'infinity' AND status IN ('pending', 'failed')
                            AND headers ? 'outboxd-destination') AS waiting_disabled,
           min(created_at) FILTER (WHERE status IN ('pending', 'failed') AND available_at <> 'infinity') AS oldest
    -- sink IS NOT NULL: the open index's predicate (migration 012).
    FROM {schema}.messages WHERE phase = 'open' AND sink IS NOT NULL GROUP BY sink
    UNION ALL
    SELECT sink, 0, 0, 0, count(*), 0, 0, NULL FROM {schema}.messages WHERE phase = 'dead' GROUP BY sink
    UNION ALL
    SELECT sink, 0, 0, 0, 0, count(*), 0, NULL FROM {schema}.messages_history
    WHERE sent_at > now() - $1::interval GROUP BY sink
    UNION ALL
    -- Sent rows stored before migration 013, until maintenance moves them.
    SELECT sink, 0, 0, 0, 0, count(*), 0, NULL FROM {schema}.messages
    WHERE phase = 'sent' AND sent_at > now() - $1::interval GROUP BY sink
), counts AS (
    SELECT sink, sum(pending) AS pending, sum(in_progress) AS in_progress, sum(failed) AS failed,
           sum(dead) AS dead, sum(sent) AS sent, sum(waiting_disabled) AS waiting_disabled, min(oldest) AS oldest
    FROM parts GROUP BY sink
), gone AS (
    DELETE FROM {schema}.sink_stats s WHERE NOT EXISTS (SELECT 1 FROM counts c WHERE c.sink = s.sink)
), stamped AS (
    INSERT INTO {schema}.sink_stats_lead AS l (taken_by, taken_at, computed_at) VALUES ($2, now(), now())
    ON CONFLICT (one) DO UPDATE SET computed_at = now()
)
INSERT INTO {schema}.sink_stats AS s
    (sink, pending, in_progress, failed, dead, sent_last_hour, waiting_disabled, oldest_waiting_at)
SELECT sink, pending, in_progress, failed, dead, sent, waiting_disabled, oldest FROM counts
ON CONFLICT (sink) DO UPDATE
SET pending = EXCLUDED.pending, in_progress = EXCLUDED.in_progress, failed = EXCLUDED.failed,
    dead = EXCLUDED.dead, sent_last_hour = EXCLUDED.sent_last_hour,
    waiting_disabled = EXCLUDED.waiting_disabled, oldest_waiting_at = EXCLUDED.oldest_waiting_at

-- name: take_stats_snapshot :exec
-- params: sent_window, by text, big bigint, big_every
-- Recomputes sink_stats from what is cheap to count: the open rows
-- (pending, in progress, failed) through the open index, dead rows through
-- the dead index and the rows sent in the last $1 through the sent_at index
-- of messages_history (and messages' sent index, for rows stored before
-- migration 013). Of the pending and failed rows, those of a disabled
-- destination (due at infinity, migration 021) are counted apart too, and
-- left out of the oldest waiting row: they wait by the operator's will,
-- not because delivery is behind.
-- A sink with $3 open rows or more at its last count (a large backlog:
-- a paused or throttled sink, one no relay is configured for) keeps those
-- counts until they are $4 old or a hundredth of them has been delivered
-- (migration 022): counting its rows reads
-- each of them, seconds of a core for a million, which every few seconds
-- took that core from the claims of every other sink. The open rows are
-- counted sink by sink, each through its own part of the open index
-- (open_row_counts, migration 024), so the rows of a sink whose counts are
-- kept are never read.
-- Older delivered history is never read. Each part is one GROUP BY over a
-- partial index's rows; the predicates repeat the indexes' own (on phase)
-- so the planner can use them. Sinks left with no such rows are removed,
-- and the time of the snapshot is recorded with the lead ($2 takes it when
-- no relay holds it).
WITH RECURSIVE open_sinks AS (
    -- The sinks with open rows: one probe of the open index per sink.
    (SELECT m.sink FROM {schema}.messages m WHERE m.phase = 'open' AND m.sink IS NOT NULL ORDER BY m.sink LIMIT 1)
    UNION ALL
    SELECT (SELECT m.sink FROM {schema}.messages m
            WHERE m.phase = 'open' AND m.sink IS NOT NULL AND m.sink > o.sink ORDER BY m.sink LIMIT 1)
    FROM open_sinks o WHERE o.sink IS NOT NULL
), kept AS MATERIALIZED (
    -- Large backlogs counted less than $4 ago keep their counts, unless
    -- the relays have since delivered (or dead-lettered) a hundredth of
    -- them (delivery_minutes, flushed every few seconds): a sink resumed
    -- and draining is counted again at once, a paused, unconfigured or
    -- slowly throttled one is not.
    SELECT coalesce(array_agg(s.sink), '{}') AS sinks FROM {schema}.sink_stats s
    WHERE s.pending + s.in_progress + s.failed >= $3 AND s.open_counted_at > now() - $4::interval
      AND 100 * (SELECT coalesce(sum(d.sent + d.dead), 0) FROM {schema}.delivery_minutes d
                 WHERE d.sink = s.sink AND d.minute >= date_trunc('minute', s.open_counted_at))
          < s.pending + s.in_progress + s.failed
), parts AS (
    SELECT o.sink, c.pending, c.in_progress, c.failed, 0::bigint AS dead, 0::bigint AS sent, c.waiting_disabled, c.oldest
    -- A function (migration 024): here the sink would be unknown to the
    -- planner, which then plans a sequential scan of the whole table.
    FROM open_sinks o CROSS JOIN LATERAL {schema}.open_row_counts(o.sink) c
    WHERE o.sink IS NOT NULL AND NOT (o.sink = ANY((SELECT k.sinks FROM kept k)::text[]))
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
      AND NOT (s.sink = ANY((SELECT k.sinks FROM kept k)::text[]))
), stamped AS (
    INSERT INTO {schema}.sink_stats_lead AS l (taken_by, taken_at, computed_at) VALUES ($2, now(), now())
    ON CONFLICT (one) DO UPDATE SET computed_at = now()
)
INSERT INTO {schema}.sink_stats AS s
    (sink, pending, in_progress, failed, dead, sent_last_hour, waiting_disabled, oldest_waiting_at, open_counted_at)
-- A kept sink (st) keeps the open counts of its last count.
SELECT c.sink, coalesce(st.pending, c.pending), coalesce(st.in_progress, c.in_progress), coalesce(st.failed, c.failed),
       c.dead, c.sent, coalesce(st.waiting_disabled, c.waiting_disabled),
       CASE WHEN st.sink IS NULL THEN c.oldest ELSE st.oldest_waiting_at END, coalesce(st.open_counted_at, now())
FROM counts c
LEFT JOIN {schema}.sink_stats st ON st.sink = c.sink AND st.sink = ANY((SELECT k.sinks FROM kept k)::text[])
ON CONFLICT (sink) DO UPDATE
SET pending = EXCLUDED.pending, in_progress = EXCLUDED.in_progress, failed = EXCLUDED.failed,
    dead = EXCLUDED.dead, sent_last_hour = EXCLUDED.sent_last_hour,
    waiting_disabled = EXCLUDED.waiting_disabled, oldest_waiting_at = EXCLUDED.oldest_waiting_at,
    open_counted_at = EXCLUDED.open_counted_at

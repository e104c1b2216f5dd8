-- name: stats_snapshot :many
-- returns: computed_at timestamptz, taken_by text, sink text null, pending bigint, in_progress bigint
-- returns: failed bigint, dead bigint, sent_last_hour bigint, waiting_disabled bigint, oldest_waiting_seconds double precision
-- The last sink_stats snapshot: when it was computed and by which relay
-- (no row before any was), and per sink its counts (of its pending and
-- failed rows, those waiting on a disabled destination) and the age in seconds
-- of its oldest waiting row (one row with a NULL sink and zeros when no
-- sink has any). A few rows, whatever the size of the messages table.
-- LIMIT 1 tells the planner what the table's one-row check says: without
-- it, two tables too small to be analyzed make it expect a join of
-- hundreds of thousands of rows and compile the query with JIT (tens of
-- milliseconds) on every read.
WITH lead AS (
    SELECT computed_at, taken_by FROM {schema}.sink_stats_lead WHERE computed_at IS NOT NULL LIMIT 1
)
SELECT lead.computed_at, lead.taken_by, s.sink, COALESCE(s.pending, 0), COALESCE(s.in_progress, 0),
       COALESCE(s.failed, 0), COALESCE(s.dead, 0), COALESCE(s.sent_last_hour, 0), COALESCE(s.waiting_disabled, 0),
       COALESCE(extract(epoch FROM now() - s.oldest_waiting_at), 0)::float8
FROM lead LEFT JOIN {schema}.sink_stats s ON true
ORDER BY s.sink

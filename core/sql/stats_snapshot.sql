-- The last sink_stats snapshot: when it was computed and by which relay
-- (no row before any was), and per sink its counts and the age in seconds
-- of its oldest waiting row (one row with a NULL sink when no sink has
-- any). A few rows, whatever the size of the messages table.
SELECT l.computed_at, l.taken_by, s.sink, s.pending, s.in_progress, s.failed, s.dead, s.sent_last_hour,
       COALESCE(extract(epoch FROM now() - s.oldest_waiting_at), 0)::float8
FROM {schema}.sink_stats_lead l LEFT JOIN {schema}.sink_stats s ON true
WHERE l.computed_at IS NOT NULL
ORDER BY s.sink

-- The last sink_stats snapshot: when it was computed and by which relay
-- (no row before any was), and per sink its counts and the age in seconds
-- of its oldest waiting row (one row with a NULL sink and zeros when no
-- sink has any). A few rows, whatever the size of the messages table.
SELECT l.computed_at, l.taken_by, s.sink, COALESCE(s.pending, 0), COALESCE(s.in_progress, 0),
       COALESCE(s.failed, 0), COALESCE(s.dead, 0), COALESCE(s.sent_last_hour, 0),
       COALESCE(extract(epoch FROM now() - s.oldest_waiting_at), 0)::float8
FROM {schema}.sink_stats_lead l LEFT JOIN {schema}.sink_stats s ON true
WHERE l.computed_at IS NOT NULL
ORDER BY s.sink

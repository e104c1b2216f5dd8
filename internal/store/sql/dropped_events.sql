-- name: dropped_events :one
-- returns: dropped numeric as int64
-- The number of events dropped because no route matched them, ever:
-- the folded totals plus the rows not folded yet.
SELECT (SELECT coalesce(sum(dropped), 0) FROM {schema}.events_dropped_totals)
     + (SELECT count(*) FROM {schema}.events_dropped)

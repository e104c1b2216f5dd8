-- name: fold_dropped_events :exec
-- Folds the events dropped since the last fold (routes_unmatched: drop;
-- one row each, so publishers never wait on a counter row) into the
-- per-type totals. Returns how many it folded.
WITH moved AS (
    DELETE FROM {schema}.events_dropped RETURNING event_type
), totals AS (
    INSERT INTO {schema}.events_dropped_totals AS t (event_type, dropped)
    SELECT event_type, count(*) FROM moved GROUP BY event_type
    ON CONFLICT (event_type) DO UPDATE SET dropped = t.dropped + excluded.dropped
)
SELECT count(*) FROM moved

-- Moves dead rows back to pending with their attempts reset and wakes a
-- relay loop for each of their sinks: the rows with ids $1, or with $2
-- every dead row of sink $3 (unless '') whose last error contains $4
-- (ignoring case; unless '') and whose id is at most $5 (unless 0: the
-- largest id a dry run counted, so a confirmed "all" moves no row that
-- died after the count). With $6 (a dry run) nothing moves. Returns how
-- many rows moved (or would), the largest of their ids, and the ids of $1
-- that name no dead row. Planned with its values (core's oneShot), so the
-- dead index (phase = 'dead') serves the selection.
WITH target AS (
    SELECT id FROM {schema}.messages
    WHERE phase = 'dead'
      AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)
           AND ($4 = '' OR strpos(lower(last_error), lower($4)) > 0) AND ($5 = 0 OR id <= $5)))
), moved AS (
    UPDATE {schema}.messages m
    SET status = 'pending', attempts = 0, available_at = now(), updated_at = now(),
        lease_token = NULL, lease_expires_at = NULL
    WHERE NOT $6 AND m.phase = 'dead'
      -- Probes the primary key for each target instead of joining a scan.
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id, m.sink
), wake AS (SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM moved) s)
SELECT CASE WHEN $6 THEN (SELECT count(*) FROM target) ELSE (SELECT count(*) FROM moved) END,
       COALESCE((SELECT max(id) FROM target), 0),
       ARRAY(SELECT unnest($1::bigint[]) EXCEPT SELECT id FROM target)
-- CROSS JOIN: a LEFT JOIN to a one-row subquery whose columns nothing
-- reads is removed by the planner, and the wake-ups would never run.
FROM (SELECT 1) AS one CROSS JOIN (SELECT count(*) FROM wake) w

-- name: redrive :one
-- mode: cache_describe
-- params: all boolean, sink text, error_contains text, dry_run boolean
-- returns: rows bigint, last_id bigint, missing bigint[]
-- Moves dead rows back to pending with their attempts and deferrals reset and wakes a
-- relay loop for each of their sinks: the rows with ids @ids, or with @all
-- every dead row of sink @sink (unless '') whose last error contains @error_contains
-- (ignoring case; unless '') and whose id is at most @up_to_id (unless 0: the
-- largest id a dry run counted, so a confirmed "all" moves no row that
-- died after the count). With @dry_run (a dry run) nothing moves. Returns how
-- many rows moved (or would), the largest of their ids, and the ids of @ids
-- that name no dead row. Planned with its values (core's oneShot), so the
-- dead index (phase = 'dead') serves the selection. @up_to_id is cast:
-- compared with 0 alone the server typed it integer, and an id above 2^31
-- failed.
WITH target AS (
    SELECT id FROM {schema}.messages
    WHERE phase = 'dead'
      AND (id = ANY(@ids) OR (@all AND (@sink = '' OR sink = @sink)
           AND (@error_contains = '' OR strpos(lower(last_error), lower(@error_contains)) > 0) AND (@up_to_id::bigint = 0 OR id <= @up_to_id)))
), moved AS (
    UPDATE {schema}.messages m
    SET status = 'pending', attempts = 0, deferrals = 0, available_at = now(), updated_at = now(),
        lease_token = NULL, lease_expires_at = NULL
    WHERE NOT @dry_run AND m.phase = 'dead'
      -- Probes the primary key for each target instead of joining a scan.
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id, m.sink
), wake AS (SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM moved) s)
SELECT CASE WHEN @dry_run THEN (SELECT count(*) FROM target) ELSE (SELECT count(*) FROM moved) END,
       COALESCE((SELECT max(id) FROM target), 0),
       ARRAY(SELECT unnest(@ids::bigint[]) EXCEPT SELECT id FROM target)
-- CROSS JOIN: a LEFT JOIN to a one-row subquery whose columns nothing
-- reads is removed by the planner, and the wake-ups would never run.
FROM (SELECT 1) AS one CROSS JOIN (SELECT count(*) FROM wake) w

-- name: redrive :one
-- mode: cache_describe
-- params: all boolean, sink text, error_contains text, dry_run boolean, digest text, dead_until timestamptz null
-- returns: rows bigint, last_id bigint, dead_until timestamptz null, digest text, changed boolean, missing bigint[]
-- Moves dead rows back to pending with their attempts and deferrals reset
-- and wakes a relay loop for each of their sinks: the rows with ids @ids,
-- or with @all
-- every dead row of sink @sink (unless '') whose last error contains @error_contains
-- (ignoring case; unless ''). With @dry_run (a dry run) nothing moves.
-- A confirmation passes what its dry run returned, as purge.sql: the
-- selection is bounded by @up_to_id and @dead_until, and unless its
-- @digest is still the counted one nothing moves and changed is true.
-- Returns how many rows moved (or would, or now match), the largest of
-- their ids, the latest of their death times, their digest, whether the
-- selection changed, and the ids of @ids that name no dead row. Planned
-- with its values (core's oneShot), so the dead index (phase = 'dead')
-- serves the selection. @up_to_id is cast: compared with 0 alone the
-- server typed it integer, and an id above 2^31 failed.
WITH target AS (
    SELECT id, updated_at FROM {schema}.messages
    WHERE phase = 'dead'
      AND (id = ANY(@ids) OR (@all AND (@sink = '' OR sink = @sink)
           AND (@error_contains = '' OR strpos(lower(last_error), lower(@error_contains)) > 0)))
      AND (@up_to_id::bigint = 0 OR id <= @up_to_id)
      AND (@dead_until::timestamptz IS NULL OR updated_at <= @dead_until)
), counted AS (
    -- The digest as purge.sql's.
    SELECT count(*) AS rows, COALESCE(max(id), 0) AS last_id, max(updated_at) AS dead_until,
           md5(COALESCE(string_agg(id::text || '@' || (extract(epoch FROM updated_at) * 1000000)::bigint::text, ',' ORDER BY id), '')) AS digest
    FROM target
), confirmed AS (
    SELECT c.*, @digest = '' OR c.digest = @digest AS ok FROM counted c
), moved AS (
    UPDATE {schema}.messages m
    SET status = 'pending', attempts = 0, deferrals = 0, available_at = now(), updated_at = now(),
        lease_token = NULL, lease_expires_at = NULL,
        -- A member of a digest not yet sent leaves it: a later post of the
        -- digest carries no row its earlier posts did not (docs/digests.md).
        digest_id = CASE WHEN EXISTS (SELECT 1 FROM {schema}.digests d WHERE d.id = m.digest_id AND d.sent_at IS NULL)
                         THEN NULL ELSE m.digest_id END
    WHERE NOT @dry_run AND (SELECT ok FROM confirmed) AND m.phase = 'dead'
      -- Probes the primary key for each target instead of joining a scan.
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id, m.sink
), wake AS (SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM moved) s)
SELECT CASE WHEN @dry_run OR NOT c.ok THEN c.rows ELSE (SELECT count(*) FROM moved) END,
       c.last_id, c.dead_until, c.digest, NOT c.ok,
       ARRAY(SELECT unnest(@ids::bigint[]) EXCEPT SELECT id FROM target)
-- CROSS JOIN: a LEFT JOIN to a one-row subquery whose columns nothing
-- reads is removed by the planner, and the wake-ups would never run.
FROM confirmed c CROSS JOIN (SELECT count(*) FROM wake) w

-- name: purge :one
-- mode: cache_describe
-- params: all boolean, sink text, error_contains text, dry_run boolean, waiting boolean
-- returns: rows bigint, last_id bigint, missing bigint[]
-- Deletes dead rows and their recorded failed attempts: the rows with ids
-- @ids, or with @all every dead row of sink @sink (unless '') whose last error
-- contains @error_contains (ignoring case; unless '') and whose id is at most @up_to_id
-- (unless 0: the largest id a dry run counted, so a confirmed "all"
-- deletes no row that died after the count). With @waiting the rows of sink @sink
-- still waiting for delivery (pending or failed) go too: the way to drop
-- the rows of a sink no relay will ever have. With @dry_run (a dry run) nothing
-- is deleted. Returns how many rows were deleted (or would be), the
-- largest of their ids, and the ids of @ids that name no dead row. Planned
-- with its values (core's oneShot). @up_to_id is cast: compared with 0
-- alone the server typed it integer, and an id above 2^31 failed.
WITH target AS (
    SELECT id FROM {schema}.messages
    WHERE (phase = 'dead' OR (@waiting AND status IN ('pending', 'failed')))
      AND (id = ANY(@ids) OR (@all AND (@sink = '' OR sink = @sink)
           AND (@error_contains = '' OR strpos(lower(last_error), lower(@error_contains)) > 0) AND (@up_to_id::bigint = 0 OR id <= @up_to_id)))
), gone AS (
    DELETE FROM {schema}.messages m
    WHERE NOT @dry_run AND (m.phase = 'dead' OR (@waiting AND m.status IN ('pending', 'failed')))
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
)
SELECT CASE WHEN @dry_run THEN (SELECT count(*) FROM target) ELSE (SELECT count(*) FROM gone) END,
       COALESCE((SELECT max(id) FROM target), 0),
       ARRAY(SELECT unnest(@ids::bigint[]) EXCEPT SELECT id FROM target)

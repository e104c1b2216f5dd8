-- name: purge :one
-- mode: cache_describe
-- params: all boolean, sink text, destination text, error_contains text, dry_run boolean, waiting boolean, digest text, dead_until timestamptz null
-- returns: rows bigint, last_id bigint, dead_until timestamptz null, digest text, changed boolean, missing bigint[]
-- Deletes dead rows with their recorded failed attempts and their keys: the rows with ids
-- @ids, or with @all every dead row of sink @sink (unless '') whose last error
-- contains @error_contains (ignoring case; unless '') and, unless @destination is '',
-- that is addressed to destination @destination (its outboxd-destination
-- header, docs/destinations.md). With @waiting the rows of sink @sink (or
-- of destination @destination) still waiting for delivery (pending or
-- failed) go too: the way to drop the rows of a sink no relay will ever
-- have, or those parked for a disabled destination. With @dry_run (a dry
-- run) nothing is deleted.
-- A confirmation passes what its dry run returned (operator's token): the
-- selection is bounded to ids up to @up_to_id and rows that last changed
-- (died) by @dead_until, so rows that died after the count are left out
-- whatever their id (rows die in attempt order, not id order); and unless
-- the bounded selection's @digest (its ids and death times) is still the
-- counted one, nothing is deleted and changed is true: the selection
-- changed since it was counted, and the result is its new count.
-- Returns how many rows were deleted (or would be, or now match), the
-- largest of their ids, the latest of their death times, their digest,
-- whether the selection changed, and the ids of @ids that name no dead
-- row. Planned with its values (core's oneShot). @up_to_id is cast:
-- compared with 0 alone the server typed it integer, and an id above 2^31
-- failed.
WITH target AS (
    SELECT id, updated_at FROM {schema}.messages
    WHERE (phase = 'dead' OR (@waiting AND status IN ('pending', 'failed')))
      AND (id = ANY(@ids) OR (@all AND (@sink = '' OR sink = @sink)
           AND (@destination = '' OR headers->>'outboxd-destination' = @destination)
           AND (@error_contains = '' OR strpos(lower(last_error), lower(@error_contains)) > 0)))
      AND (@up_to_id::bigint = 0 OR id <= @up_to_id)
      AND (@dead_until::timestamptz IS NULL OR updated_at <= @dead_until)
), counted AS (
    -- The digest names the set: each id with its death time in
    -- microseconds (text of a timestamptz would follow the session's
    -- TimeZone and DateStyle).
    SELECT count(*) AS rows, COALESCE(max(id), 0) AS last_id, max(updated_at) AS dead_until,
           md5(COALESCE(string_agg(id::text || '@' || (extract(epoch FROM updated_at) * 1000000)::bigint::text, ',' ORDER BY id), '')) AS digest
    FROM target
), confirmed AS (
    SELECT c.*, @digest = '' OR c.digest = @digest AS ok FROM counted c
), gone AS (
    DELETE FROM {schema}.messages m
    WHERE NOT @dry_run AND (SELECT ok FROM confirmed)
      AND (m.phase = 'dead' OR (@waiting AND m.status IN ('pending', 'failed')))
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id, m.sink, m.dedup_key
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
), unkeyed AS (
    -- A purged row frees its key (migration 013), as it always did.
    DELETE FROM {schema}.message_keys k USING gone g
    WHERE k.sink = g.sink AND k.dedup_key = g.dedup_key AND k.id = g.id
)
SELECT CASE WHEN @dry_run OR NOT c.ok THEN c.rows ELSE (SELECT count(*) FROM gone) END,
       c.last_id, c.dead_until, c.digest, NOT c.ok,
       ARRAY(SELECT unnest(@ids::bigint[]) EXCEPT SELECT id FROM target)
FROM confirmed c

-- Deletes dead rows and their recorded failed attempts: the rows with ids
-- $1, or with $2 every dead row of sink $3 (unless '') whose last error
-- contains $4 (ignoring case; unless '') and whose id is at most $5
-- (unless 0: the largest id a dry run counted, so a confirmed "all"
-- deletes no row that died after the count). With $7 the rows of sink $3
-- still waiting for delivery (pending or failed) go too: the way to drop
-- the rows of a sink no relay will ever have. With $6 (a dry run) nothing
-- is deleted. Returns how many rows were deleted (or would be), the
-- largest of their ids, and the ids of $1 that name no dead row. Planned
-- with its values (core's oneShot).
WITH target AS (
    SELECT id FROM {schema}.messages
    WHERE (phase = 'dead' OR ($7 AND status IN ('pending', 'failed')))
      AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)
           AND ($4 = '' OR strpos(lower(last_error), lower($4)) > 0) AND ($5 = 0 OR id <= $5)))
), gone AS (
    DELETE FROM {schema}.messages m
    WHERE NOT $6 AND (m.phase = 'dead' OR ($7 AND m.status IN ('pending', 'failed')))
      AND m.id = ANY(ARRAY(SELECT id FROM target))
    RETURNING m.id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
)
SELECT CASE WHEN $6 THEN (SELECT count(*) FROM target) ELSE (SELECT count(*) FROM gone) END,
       COALESCE((SELECT max(id) FROM target), 0),
       ARRAY(SELECT unnest($1::bigint[]) EXCEPT SELECT id FROM target)

-- name: unconfigured_sinks :many
-- params: configured
-- returns: sink text
-- The distinct sinks of the messages table other than $1. A skip scan of
-- the (sink, dedup_key) index: one probe per distinct sink, so the cost
-- follows the number of sinks, not of rows.
WITH RECURSIVE sinks AS (
    (SELECT sink FROM {schema}.messages ORDER BY sink LIMIT 1)
    UNION ALL
    SELECT (SELECT m.sink FROM {schema}.messages m WHERE m.sink > s.sink ORDER BY m.sink LIMIT 1)
    FROM sinks s WHERE s.sink IS NOT NULL
)
SELECT sink FROM sinks WHERE sink IS NOT NULL AND NOT (sink = ANY($1::text[])) ORDER BY sink

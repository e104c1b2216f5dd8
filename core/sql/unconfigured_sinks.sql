-- The sinks other than $1 that have rows waiting for delivery (pending or
-- failed), with their count and the age in seconds of the oldest. The
-- distinct sink names come from a skip scan of the (sink, dedup_key) index,
-- one probe per sink, so the cost follows the number of sinks, not of rows;
-- only the waiting rows of sinks not in $1 are then counted.
WITH RECURSIVE sinks AS (
    (SELECT sink FROM {schema}.messages ORDER BY sink LIMIT 1)
    UNION ALL
    SELECT (SELECT m.sink FROM {schema}.messages m WHERE m.sink > s.sink ORDER BY m.sink LIMIT 1)
    FROM sinks s WHERE s.sink IS NOT NULL
)
SELECT s.sink, w.waiting, extract(epoch FROM now() - w.oldest)
FROM sinks s
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting, min(created_at) AS oldest
    FROM {schema}.messages m
    WHERE m.sink = s.sink AND m.status IN ('pending', 'failed')
) w
WHERE s.sink IS NOT NULL AND NOT (s.sink = ANY($1::text[])) AND w.waiting > 0
ORDER BY s.sink

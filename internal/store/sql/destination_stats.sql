-- name: destination_stats :one
-- params: destination text, span interval
-- returns: sent bigint, retried bigint, dead bigint, latency_buckets bigint[] as []int64
-- The delivery counts of destination $1 over the last $2 (migration
-- 033's per-minute rows, the current minute included) summed, with their
-- latency buckets added up element by element: at most one row a minute
-- of the span, read through the primary key.
SELECT COALESCE(sum(m.sent), 0)::bigint, COALESCE(sum(m.retried), 0)::bigint, COALESCE(sum(m.dead), 0)::bigint,
       COALESCE(ARRAY(SELECT sum(b.n)::bigint
                      FROM {schema}.destination_minutes m2, unnest(m2.latency_buckets) WITH ORDINALITY AS b(n, i)
                      WHERE m2.destination = $1 AND m2.minute >= date_trunc('minute', now()) + interval '1 minute' - $2::interval
                      GROUP BY b.i ORDER BY b.i), '{}')
FROM {schema}.destination_minutes m
WHERE m.destination = $1 AND m.minute >= date_trunc('minute', now()) + interval '1 minute' - $2::interval

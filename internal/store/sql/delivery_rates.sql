-- name: delivery_rates :many
-- params: window interval
-- returns: sink text, sent bigint, retried bigint, dead bigint, buckets bigint[] null, covered_seconds double precision
-- Per sink, the deliveries of the last $1 in whole minutes (the current,
-- unfinished minute included) with their latency buckets summed element by
-- element, and the seconds the window really covers. Reads a few rows per
-- sink of delivery_minutes, never a message.
WITH win AS (
    SELECT date_trunc('minute', now()) + interval '1 minute' - $1::interval AS since
), w AS (
    SELECT d.* FROM {schema}.delivery_minutes d, win WHERE d.minute >= win.since
), b AS (
    SELECT w.sink, u.i, sum(u.n)::bigint AS n
    FROM w, unnest(w.latency_buckets) WITH ORDINALITY AS u(n, i)
    GROUP BY w.sink, u.i
)
SELECT w.sink, sum(w.sent)::bigint, sum(w.retried)::bigint, sum(w.dead)::bigint,
       (SELECT array_agg(b.n ORDER BY b.i) FROM b WHERE b.sink = w.sink),
       extract(epoch FROM now() - (SELECT since FROM win))::float8
FROM w GROUP BY w.sink
ORDER BY w.sink

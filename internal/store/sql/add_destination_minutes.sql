-- name: add_destination_minutes :exec
-- params: buckets bigint
-- Adds one relay's delivery counts of the last few seconds to the current
-- minute's row of each tenant's destination (migration 033), as
-- add_delivery_minutes.sql does per sink: @destinations destinations
-- (sorted, so two relays lock the rows in the same order and never
-- deadlock), @sent sent, @retried retried, @dead dead, @latency the latency
-- buckets of every destination one after the other, @buckets buckets per
-- destination.
INSERT INTO {schema}.destination_minutes AS d (destination, minute, sent, retried, dead, latency_buckets)
SELECT c.destination, date_trunc('minute', now()), c.sent, c.retried, c.dead,
       (@latency::bigint[])[(c.ord - 1) * @buckets + 1 : c.ord * @buckets]
FROM unnest(@destinations::text[], @sent::bigint[], @retried::bigint[], @dead::bigint[]) WITH ORDINALITY AS c(destination, sent, retried, dead, ord)
ORDER BY c.destination
ON CONFLICT (destination, minute) DO UPDATE
SET sent = d.sent + EXCLUDED.sent, retried = d.retried + EXCLUDED.retried, dead = d.dead + EXCLUDED.dead,
    latency_buckets = ARRAY(
        SELECT COALESCE(a, 0) + COALESCE(b, 0)
        FROM unnest(d.latency_buckets, EXCLUDED.latency_buckets) WITH ORDINALITY AS t(a, b, i)
        ORDER BY i)

-- name: breaker_open :one
-- params: sink text, dest_key text, reason text, last_failure text, probe_interval interval, channel text, payload text
-- returns: opened boolean, opened_at timestamptz
-- Opens the breaker of receiver (@sink, @dest_key: the sink, or one of its
-- rate keys) for every relay unless it is open already: its first probe comes after @probe_interval.
-- Notification @payload on @channel makes every running relay reload the
-- breakers. Returns whether this call opened it, and since when it is open.
WITH opened AS (
    INSERT INTO {schema}.destination_breakers AS b
        (sink, dest_key, reason, last_failure, probe_interval, next_probe_at)
    VALUES (@sink, @dest_key, @reason, @last_failure, @probe_interval::interval, now() + @probe_interval::interval)
    ON CONFLICT (sink, dest_key) DO NOTHING
    RETURNING b.opened_at
), told AS (
    SELECT pg_notify(@channel, @payload) FROM opened
)
SELECT true, opened.opened_at FROM opened LEFT JOIN told ON true
UNION ALL
SELECT false, b.opened_at FROM {schema}.destination_breakers b
WHERE b.sink = @sink AND b.dest_key = @dest_key AND NOT EXISTS (SELECT FROM opened)

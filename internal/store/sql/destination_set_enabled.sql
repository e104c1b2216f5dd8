-- name: destination_set_enabled :one
-- params: tenant text, id text, enabled boolean, reason text, channel text, pause_prefix text
-- returns: rows bigint
-- Enables or disables destination $2 of tenant $1 (reason $4, '' when
-- enabling). Its waiting rows follow: disabling makes them due at
-- infinity, so no relay claims them and nothing is dead-lettered;
-- enabling makes the ones due at infinity due now and wakes a relay
-- waiting for their sink. Disabling ends the destination's circuit
-- breakers too (its rows are not claimed; enabled again it starts
-- afresh), and notification $6 || <sink> on $5 makes every relay reload
-- them. Returns how many rows moved. The caller holds the destination's
-- row lock (destination_lock.sql) and runs this in READ COMMITTED: see
-- migration 021 for why.
WITH d AS (
    UPDATE {schema}.destinations SET enabled = $3, disabled_reason = CASE WHEN $3 THEN '' ELSE $4 END
    WHERE tenant = $1 AND id = $2
    RETURNING id
), moved AS (
    UPDATE {schema}.messages m
    SET available_at = CASE WHEN $3 THEN now() ELSE 'infinity' END, updated_at = now()
    WHERE (m.headers->>'outboxd-destination') = $2 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
      AND m.status <> 'in_progress' AND EXISTS (SELECT FROM d)
      AND (m.available_at = 'infinity') = $3
    RETURNING m.sink
), woken AS (
    SELECT count(*) FROM (SELECT {schema}.wake(w.sink) FROM (SELECT DISTINCT sink FROM moved) w) x
), ended AS (
    DELETE FROM {schema}.destination_breakers b
    WHERE NOT $3 AND b.dest_key = $2 AND EXISTS (SELECT FROM d)
    RETURNING b.sink
), told AS (
    SELECT count(*) FROM (SELECT pg_notify($5, $6 || e.sink) FROM ended e) x
)
SELECT (SELECT count(*) FROM moved) + 0 * (SELECT count(*) FROM woken) + 0 * (SELECT count(*) FROM told)

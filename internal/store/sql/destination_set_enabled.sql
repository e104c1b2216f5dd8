-- name: destination_set_enabled :one
-- params: tenant text, id text, enabled boolean, reason text, channel text, pause_prefix text
-- returns: rows bigint
-- Enables or disables destination $2 of tenant $1 (reason $4, '' when
-- enabling). Its waiting rows follow: disabling makes them due at
-- infinity, so no relay claims them and nothing is dead-lettered;
-- enabling a disabled destination makes the ones due at infinity due
-- now, and those a failure put off (an error, due later: a delivery or
-- probe that failed as it was disabled), as a breaker's close does, and
-- wakes a relay waiting for their sink. Both end the destination's
-- circuit breakers (disabled, its rows are not claimed; enabled, it
-- starts afresh, even if a delivery in flight at the disable opened one
-- again), and notification $6 || <sink> on $5 makes every relay reload
-- them; enabling an enabled destination moves only rows parked at
-- infinity and ends no breaker. Returns how many rows moved. The caller
-- holds the destination's row lock (destination_lock.sql) and runs this
-- in READ COMMITTED: see migration 021 for why.
WITH was AS (
    -- As the statement's snapshot has it: before the update below.
    SELECT enabled FROM {schema}.destinations WHERE tenant = $1 AND id = $2
), d AS (
    UPDATE {schema}.destinations SET enabled = $3, disabled_reason = CASE WHEN $3 THEN '' ELSE $4 END
    WHERE tenant = $1 AND id = $2
    RETURNING id
), moved AS (
    UPDATE {schema}.messages m
    SET available_at = CASE WHEN $3 THEN now() ELSE 'infinity' END, updated_at = now()
    WHERE (m.headers->>'outboxd-destination') = $2 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
      AND m.status <> 'in_progress' AND EXISTS (SELECT FROM d)
      AND CASE WHEN $3
               THEN m.available_at = 'infinity'
                    OR (m.available_at > now() AND m.last_error IS NOT NULL AND NOT (SELECT enabled FROM was))
               ELSE m.available_at <> 'infinity' END
    RETURNING m.sink
), woken AS (
    SELECT count(*) FROM (SELECT {schema}.wake(w.sink) FROM (SELECT DISTINCT sink FROM moved) w) x
), ended AS (
    DELETE FROM {schema}.destination_breakers b
    WHERE b.dest_key = $2 AND EXISTS (SELECT FROM d) AND NOT ($3 AND (SELECT enabled FROM was))
    RETURNING b.sink
), told AS (
    SELECT count(*) FROM (SELECT pg_notify($5, $6 || e.sink) FROM ended e) x
)
SELECT (SELECT count(*) FROM moved) + 0 * (SELECT count(*) FROM woken) + 0 * (SELECT count(*) FROM told)

-- name: destination_auto_disable :one
-- params: sink text, id text, open_for interval, reason text, channel text, payload text
-- returns: disabled boolean, tenant text null, opened_at timestamptz null, last_failure text null, rows bigint
-- Disables destination $2 because its breaker of sink $1 has been open
-- for $3 or longer (auto_disable_after), with reason $4: the breaker ends
-- (deleted: a disabled destination's rows are not claimed, and enabled
-- again it starts afresh), and the destination's waiting rows are parked
-- at infinity as destination_set_enabled.sql parks them, none
-- dead-lettered. A breaker whose destination is disabled or gone already
-- ends too. Notification $6 on $5 makes every relay reload the breakers.
-- Only the call that deletes the breaker row disables: relays running it
-- at once do it once. Returns whether this call disabled the destination,
-- its tenant, when and with what failure its breaker had opened, and how
-- many rows it parked.
WITH ended AS (
    DELETE FROM {schema}.destination_breakers b
    WHERE b.sink = $1 AND b.dest_key = $2 AND b.opened_at <= now() - $3::interval
    RETURNING b.opened_at, b.last_failure
), d AS (
    UPDATE {schema}.destinations d SET enabled = false, disabled_reason = $4
    FROM ended
    WHERE d.id = $2 AND d.enabled
    RETURNING d.tenant, ended.opened_at, ended.last_failure
), parked AS (
    UPDATE {schema}.messages m SET available_at = 'infinity', updated_at = now()
    WHERE (m.headers->>'outboxd-destination') = $2 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
      AND m.status <> 'in_progress' AND m.available_at <> 'infinity' AND EXISTS (SELECT FROM d)
    RETURNING 1
), told AS (
    SELECT pg_notify($5, $6) FROM ended
)
SELECT EXISTS (SELECT FROM d), (SELECT tenant FROM d), (SELECT opened_at FROM d), (SELECT last_failure FROM d),
       (SELECT count(*) FROM parked)
FROM (SELECT 1) one LEFT JOIN told ON true

-- An operator's pause of sink $1 for every relay: until now() + $2, or,
-- when $2 is NULL, until someone resumes it (then paused_until is $3
-- ahead, so every reader of it keeps finite times). It replaces the pause
-- in force, by hand or by a Retry-After, and records who ($4) and why
-- ($5). Notification $7 on channel $6 makes every running relay reload
-- its pauses at once. Returns the end of the pause.
WITH p AS (
    INSERT INTO {schema}.sink_limits AS l
        (sink, paused_until, manual_until, until_resumed, changed_by, change_reason, changed_at)
    VALUES ($1, now() + COALESCE($2::interval, $3::interval), now() + COALESCE($2::interval, $3::interval),
            $2::interval IS NULL, $4, $5, now())
    ON CONFLICT (sink) DO UPDATE
    SET paused_until = EXCLUDED.paused_until, manual_until = EXCLUDED.manual_until,
        until_resumed = EXCLUDED.until_resumed, changed_by = EXCLUDED.changed_by,
        change_reason = EXCLUDED.change_reason, changed_at = EXCLUDED.changed_at
    RETURNING l.paused_until
), told AS (
    SELECT pg_notify($6, $7) FROM p
)
SELECT p.paused_until FROM p LEFT JOIN told ON true

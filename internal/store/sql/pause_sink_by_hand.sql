-- name: pause_sink_by_hand :one
-- params: sink text, pause_for null, by text, reason text, channel text, payload text
-- returns: paused_until timestamptz
-- An operator's pause of sink @sink for every relay: until now() + @pause_for, or,
-- when @pause_for is NULL, until someone resumes it (then paused_until is @until_resumed
-- ahead, so every reader of it keeps finite times). It replaces the pause
-- in force, by hand or by a Retry-After, and records who (@by) and why
-- (@reason). Notification @payload on channel @channel makes every running relay reload
-- its pauses at once. Returns the end of the pause.
WITH p AS (
    INSERT INTO {schema}.sink_limits AS l
        (sink, paused_until, manual_until, until_resumed, changed_by, change_reason, changed_at)
    VALUES (@sink, now() + COALESCE(@pause_for::interval, @until_resumed::interval), now() + COALESCE(@pause_for::interval, @until_resumed::interval),
            @pause_for::interval IS NULL, @by, @reason, now())
    ON CONFLICT (sink) DO UPDATE
    SET paused_until = EXCLUDED.paused_until, manual_until = EXCLUDED.manual_until,
        until_resumed = EXCLUDED.until_resumed, changed_by = EXCLUDED.changed_by,
        change_reason = EXCLUDED.change_reason, changed_at = EXCLUDED.changed_at
    RETURNING l.paused_until
), told AS (
    SELECT pg_notify(@channel, @payload) FROM p
)
SELECT p.paused_until FROM p LEFT JOIN told ON true

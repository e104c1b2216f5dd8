-- name: resume_sink :one
-- params: sink text, by text, reason text, channel text, payload text
-- returns: was_paused boolean, closed_keys text[] as []string, closed_since timestamptz[] as []time.Time
-- returns: closed_reasons text[] as []string
-- Ends sink $1's pause, by hand or by a Retry-After, and closes its circuit
-- breakers (migration 008: the sink's and its keys'), for every relay, and
-- records who ($2) and why ($3). The GCRA clock, which a Retry-After
-- pushed past its pause, comes back to now, and so do the rows a
-- Retry-After put off (pending, with an error, due later; a producer's
-- delayed message has no error and keeps its time). Notification $5 on
-- channel $4 makes every running relay reload its pauses (a reload ends
-- the pauses the database no longer has), and the empty one after it
-- wakes their claim loops. Returns whether the sink was paused or had a
-- breaker open, and the breakers it closed (rate key, since when
-- and why each was open, in key order) for their closed events.
WITH before AS (
    SELECT paused_until > now() AS paused FROM {schema}.sink_limits WHERE sink = $1
), closed AS (
    DELETE FROM {schema}.destination_breakers WHERE sink = $1 RETURNING dest_key, opened_at, reason
), resumed AS (
    INSERT INTO {schema}.sink_limits AS l (sink, changed_by, change_reason, changed_at)
    VALUES ($1, $2, $3, now())
    ON CONFLICT (sink) DO UPDATE
    SET paused_until = NULL, manual_until = NULL, until_resumed = false, tat = LEAST(l.tat, now()),
        changed_by = EXCLUDED.changed_by, change_reason = EXCLUDED.change_reason, changed_at = EXCLUDED.changed_at
    RETURNING 1
), put_off AS (
    UPDATE {schema}.messages SET available_at = now()
    WHERE phase = 'open' AND available_at > now() AND status = 'pending' AND sink = $1 AND last_error IS NOT NULL
), told AS (
    SELECT pg_notify($4, $5), pg_notify($4, '') FROM resumed
)
SELECT COALESCE((SELECT paused FROM before), false) OR EXISTS (SELECT FROM closed),
       COALESCE((SELECT array_agg(dest_key ORDER BY dest_key) FROM closed), '{}'),
       COALESCE((SELECT array_agg(opened_at ORDER BY dest_key) FROM closed), '{}'),
       COALESCE((SELECT array_agg(reason ORDER BY dest_key) FROM closed), '{}')
FROM told

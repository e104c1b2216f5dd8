-- name: breaker_close :one
-- params: sink text, dest_key text, held_error text, channel text, payload text
-- returns: closed boolean, opened_at timestamptz null, reason text null
-- Closes the breaker of receiver (@sink, @dest_key) after a probe
-- succeeded. The rows the outage put off come due now, so delivery
-- resumes at full speed at once rather than after each row's backoff: a
-- sink's (pending or failed with an error, due later; a producer's
-- delayed message has no error and keeps its time), or a rate key's,
-- which the relays parked with the error @held_error naming the key (the
-- claim cannot tell a row's key; see relay's holdOpenKeys). Notification
-- @payload on @channel makes every running relay reload the breakers,
-- and the empty one after it wakes their claim loops. Returns whether
-- this call closed it, and when and why it had opened.
WITH closed AS (
    DELETE FROM {schema}.destination_breakers
    WHERE sink = @sink AND dest_key = @dest_key
    RETURNING opened_at, reason
), put_off AS (
    UPDATE {schema}.messages SET available_at = now()
    WHERE EXISTS (SELECT FROM closed)
      AND phase = 'open' AND available_at > now() AND status IN ('pending', 'failed')
      AND sink = @sink
      AND CASE WHEN @dest_key = '' THEN last_error IS NOT NULL ELSE last_error = @held_error END
), told AS (
    SELECT pg_notify(@channel, @payload), pg_notify(@channel, '') FROM closed
)
SELECT EXISTS (SELECT FROM closed), (SELECT opened_at FROM closed), (SELECT reason FROM closed)
FROM (SELECT 1) one LEFT JOIN told ON true

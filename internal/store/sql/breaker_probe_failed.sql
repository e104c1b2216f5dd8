-- name: breaker_probe_failed :exec
-- params: sink text, dest_key text, last_failure text, retry_after interval
-- Records that the probe of breaker (@sink, @dest_key) failed with
-- @last_failure: it stays open until its next probe. A probe answered with
-- a Retry-After (@retry_after above zero) comes back when the receiver
-- said, not after the doubled interval breaker_take_probe set: the
-- receiver is up and named its time, and a probe that came later than
-- asked could meet the next throttling spell every time.
UPDATE {schema}.destination_breakers
SET probing_until = NULL, last_failure = @last_failure, last_failure_at = now(),
    next_probe_at = CASE WHEN @retry_after::interval > interval '0' THEN now() + @retry_after::interval ELSE next_probe_at END
WHERE sink = @sink AND dest_key = @dest_key

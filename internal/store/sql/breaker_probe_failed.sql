-- name: breaker_probe_failed :exec
-- params: sink text, dest_key text, last_failure text, retry_after interval, max_interval interval
-- Records that the probe of breaker (@sink, @dest_key) failed with
-- @last_failure, the receiver's answer: it stays open, its probe interval
-- doubles (capped at @max_interval) and the next probe comes that doubled
-- interval from now. A probe answered with a Retry-After (@retry_after
-- above zero) comes back when the receiver said instead: the receiver is
-- up and named its time, and a probe that came later than asked could
-- meet the next throttling spell every time.
UPDATE {schema}.destination_breakers
SET probing_until = NULL, last_failure = @last_failure, last_failure_at = now(),
    probe_interval = LEAST(probe_interval * 2, @max_interval::interval),
    next_probe_at = now() + CASE WHEN @retry_after::interval > interval '0' THEN @retry_after::interval
                                 ELSE LEAST(probe_interval * 2, @max_interval::interval) END
WHERE sink = @sink AND dest_key = @dest_key

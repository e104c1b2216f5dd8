-- name: breaker_probe_failed :exec
-- params: sink text, dest_key text, last_failure text
-- Records that the probe of breaker ($1, $2) failed with $3: it stays
-- open until its next probe.
UPDATE {schema}.destination_breakers
SET probing_until = NULL, last_failure = $3, last_failure_at = now()
WHERE sink = $1 AND dest_key = $2

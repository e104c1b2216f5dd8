-- name: breakers :many
-- returns: sink text, dest_key text, opened_at timestamptz, reason text, last_failure text
-- returns: last_failure_at timestamptz, next_probe_at timestamptz, probing boolean, probes bigint as int64
-- Every open breaker: since when, why, the last failure, when the next
-- probe comes and whether a relay is delivering one now. A healthy
-- cluster has none, so relays read it every poll interval.
SELECT sink, dest_key, opened_at, reason, last_failure, last_failure_at, next_probe_at,
       COALESCE(probing_until > now(), false), probes
FROM {schema}.destination_breakers
ORDER BY sink, dest_key

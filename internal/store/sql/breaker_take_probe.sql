-- name: breaker_take_probe :execrows
-- params: sink text, dest_key text, lease interval, max_interval interval
-- Takes the probe of the open breaker (@sink, @dest_key) when it is due
-- and no other relay holds it: exactly one relay of the cluster wins each
-- probe. The probe is held for @lease; the next one comes a doubled probe
-- interval (capped at @max_interval) from now. Returns 1 for the winner.
UPDATE {schema}.destination_breakers
SET probing_until = now() + @lease::interval, probes = probes + 1,
    probe_interval = LEAST(probe_interval * 2, @max_interval::interval),
    next_probe_at = now() + LEAST(probe_interval * 2, @max_interval::interval)
WHERE sink = @sink AND dest_key = @dest_key AND next_probe_at <= now()
  AND (probing_until IS NULL OR probing_until <= now())

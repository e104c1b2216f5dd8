-- name: breaker_take_probe :execrows
-- params: sink text, dest_key text, lease interval
-- Takes the probe of the open breaker (@sink, @dest_key) when it is due
-- and no other relay holds it: exactly one relay of the cluster wins each
-- probe. The probe is held for @lease. The next one is planned a probe
-- interval from now, should this one never report (its relay died); the
-- interval itself doubles only when a probe fails
-- (breaker_probe_failed.sql), so a probe that sends nothing
-- (breaker_return_probe.sql) or dies with its relay does not stretch the
-- wait for the next. Returns 1 for the winner.
UPDATE {schema}.destination_breakers
SET probing_until = now() + @lease::interval, probes = probes + 1,
    next_probe_at = now() + probe_interval
WHERE sink = @sink AND dest_key = @dest_key AND next_probe_at <= now()
  AND (probing_until IS NULL OR probing_until <= now())

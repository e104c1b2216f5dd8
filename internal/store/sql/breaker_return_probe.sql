-- name: breaker_return_probe :exec
-- params: sink text, dest_key text
-- Gives back the probe of breaker (@sink, @dest_key) that sent nothing: no
-- row of the sink was there to probe with (all gone, put off, or held by a
-- Retry-After pause the claim respects). That says nothing about the
-- receiver, so the breaker keeps its last failure (the receiver's own
-- answer, as `outboxd stats`, the API and the console show it), the round
-- is not counted as a probe, and the probe interval stays as it was. The
-- next probe comes when the first of the sink's rows put off comes due, at
-- the latest a probe interval from now, and never before a pause of the
-- sink ends: the first request after a pause goes out as it ends. A rate
-- key's breaker (@dest_key not empty) looks at neither: its probes come
-- with its rows (see the relay's holdOpenKeys).
UPDATE {schema}.destination_breakers b
SET probing_until = NULL, probes = greatest(b.probes - 1, 0),
    next_probe_at = greatest(
        coalesce((SELECT l.paused_until FROM {schema}.sink_limits l
                  WHERE @dest_key = '' AND l.sink = @sink AND l.paused_until > now()), now()),
        least(now() + b.probe_interval,
              -- sink IS NOT NULL, queued_behind: messages_open_idx's
              -- predicate and second column (migration 017).
              (SELECT m.available_at FROM {schema}.messages m
               WHERE @dest_key = '' AND m.sink = @sink AND m.sink IS NOT NULL AND m.phase = 'open'
                 AND m.queued_behind = false AND m.available_at > now()
               ORDER BY m.available_at LIMIT 1)))
WHERE b.sink = @sink AND b.dest_key = @dest_key

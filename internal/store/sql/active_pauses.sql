-- name: active_pauses :many
-- returns: sink text, remaining interval, by_hand boolean
-- The sinks paused right now, how long each pause still runs, and whether
-- the pause in force is an operator's (by_hand, as in sink_pauses) rather
-- than a receiver's Retry-After.
SELECT sink, paused_until - now(), COALESCE(manual_until >= paused_until, false)
FROM {schema}.sink_limits WHERE paused_until > now()

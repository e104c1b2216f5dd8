-- name: active_pauses :many
-- returns: sink text, remaining interval
-- The sinks paused right now and how long each pause still runs.
SELECT sink, paused_until - now() FROM {schema}.sink_limits WHERE paused_until > now()

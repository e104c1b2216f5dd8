-- name: register_waiter :one
-- params: channel text, sinks text[], alive_for
-- returns: id bigint
-- Registers a claim loop for wake-ups (migration 006): its notification
-- channel $1, the sinks $2 it claims for, alive for $3. Returns its id.
INSERT INTO {schema}.waiters (channel, sinks, alive_until) VALUES ($1, $2, now() + $3::interval)
RETURNING id

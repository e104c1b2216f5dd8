-- name: prune_waiters :exec
-- params: dead_for
-- Removes the registrations of claim loops whose relay died: not alive for
-- $1 already.
DELETE FROM {schema}.waiters WHERE alive_until < now() - $1::interval

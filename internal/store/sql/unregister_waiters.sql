-- name: unregister_waiters :exec
-- params: ids bigint[]
-- Removes the claim loops $1 of a relay that stops: nobody wakes them any
-- more.
DELETE FROM {schema}.waiters WHERE id = ANY($1)

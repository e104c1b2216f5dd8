-- name: history_rotate :one
-- params: width, lock_wait
-- returns: rotated boolean
-- Closes the current history slot once it has been current for $1 and
-- makes a free one current (history_rotate(), migration 013), waiting at
-- most $2 for a lock. Returns whether it rotated.
SELECT {schema}.history_rotate($1::interval, $2::interval)

-- name: history_truncate :one
-- params: slot integer as int32, lock_wait
-- returns: truncated boolean
-- Truncates expiring history slot $1 and frees it (history_truncate(),
-- migration 013), waiting at most $2 for the partition's lock. Returns
-- false when a session held it longer: maintenance tries again next round.
SELECT {schema}.history_truncate($1, $2::interval)

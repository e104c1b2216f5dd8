-- name: prune_key_limits :exec
-- Deletes the per-key rate limit rows (migration 003) whose next permit is
-- already due: such a row means the same as no row (a reservation starts
-- from greatest(tat, now())), so only the keys busy right now keep one.
-- A relay that moved a row's tat forward meanwhile keeps it: the DELETE
-- rechecks the condition on the row's latest version.
DELETE FROM {schema}.sink_key_limits WHERE tat < now()

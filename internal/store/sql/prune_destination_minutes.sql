-- name: prune_destination_minutes :exec
-- params: older_than
-- Deletes the per-destination delivery counts of minutes older than $1
-- (the minute index of migration 033 serves the scan).
DELETE FROM {schema}.destination_minutes WHERE minute < now() - $1::interval

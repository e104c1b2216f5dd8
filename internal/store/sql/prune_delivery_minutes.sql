-- name: prune_delivery_minutes :exec
-- params: older_than
-- Deletes the delivery counts of minutes older than $1 (the minute index
-- serves the scan).
DELETE FROM {schema}.delivery_minutes WHERE minute < now() - $1::interval

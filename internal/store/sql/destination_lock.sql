-- name: destination_lock :execrows
-- params: tenant text, id text
-- Locks destination $2 of tenant $1 for the rest of the transaction, so
-- that a PATCH merged into it is not lost to a concurrent one. 0 rows: no
-- such destination.
SELECT 1 FROM {schema}.destinations WHERE tenant = $1 AND id = $2 FOR UPDATE

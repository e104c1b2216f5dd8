-- name: destination_exists :execrows
-- params: tenant text, id text
-- Whether tenant $1 has destination $2 (1 row) or not (0).
SELECT 1 FROM {schema}.destinations WHERE tenant = $1 AND id = $2

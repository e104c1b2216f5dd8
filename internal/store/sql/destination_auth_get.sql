-- name: destination_auth_get :many
-- params: destination_id text
-- returns: key_id text, sealed bytea
-- Destination $1's authentication as sealed (migration 034), to merge a
-- change into it: no row when it has none.
SELECT key_id, sealed FROM {schema}.destination_auth WHERE destination_id = $1

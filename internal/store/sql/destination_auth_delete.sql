-- name: destination_auth_delete :exec
-- params: destination_id text
-- Removes destination $1's authentication (migration 034): its requests
-- carry the signature alone.
DELETE FROM {schema}.destination_auth WHERE destination_id = $1

-- name: destination_auth_reseal :execrows
-- params: destination_id text, old_key_id text, key_id text, sealed bytea
-- Replaces destination $1's sealed authentication with the same sealed
-- under key $3, unless another rekey or a change got there first (its key
-- is no longer $2).
UPDATE {schema}.destination_auth SET key_id = $3, sealed = $4
WHERE destination_id = $1 AND key_id = $2

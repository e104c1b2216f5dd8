-- name: destination_secret_reseal :execrows
-- params: destination_id text, serial integer as int, old_key_id text, key_id text, sealed bytea
-- Replaces one secret's sealed form with the same secret sealed under key
-- $4, unless another rekey got there first (its key is no longer $3).
UPDATE {schema}.destination_secrets SET key_id = $4, sealed = $5
WHERE destination_id = $1 AND serial = $2 AND key_id = $3

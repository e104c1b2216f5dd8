-- name: destination_secrets_sealed :many
-- params: key_id text
-- returns: destination_id text, serial integer as int, key_id text, sealed bytea
-- The sealed secrets not sealed under key $1 (the current one): what
-- outboxd destinations rekey opens and seals again.
SELECT destination_id, serial, key_id, sealed FROM {schema}.destination_secrets
WHERE key_id <> $1
ORDER BY destination_id, serial

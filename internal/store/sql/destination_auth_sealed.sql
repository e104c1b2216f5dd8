-- name: destination_auth_sealed :many
-- params: key_id text
-- returns: destination_id text, key_id text, sealed bytea
-- The destinations' authentication not sealed under key $1 (the current
-- one): what outboxd destinations rekey opens and seals again.
SELECT destination_id, key_id, sealed FROM {schema}.destination_auth
WHERE key_id <> $1
ORDER BY destination_id

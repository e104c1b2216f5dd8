-- name: destination_auth_save :exec
-- params: destination_id text, key_id text, sealed bytea, shown jsonb as json.RawMessage
-- Sets destination $1's authentication (migration 034): sealed by package
-- destinations under key $2, and what may be shown of it. Its caller
-- updates the destination's row in the same transaction, which moves its
-- revision.
INSERT INTO {schema}.destination_auth (destination_id, key_id, sealed, shown) VALUES ($1, $2, $3, $4)
ON CONFLICT (destination_id) DO UPDATE SET key_id = excluded.key_id, sealed = excluded.sealed, shown = excluded.shown

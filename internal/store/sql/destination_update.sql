-- name: destination_update :one
-- params: tenant text, id text, url text, description text, events text[]
-- params: rate_limit double precision null, metadata jsonb as json.RawMessage, filter jsonb null
-- returns: updated_at timestamptz
-- Replaces the changeable fields of destination $2 of tenant $1 (package
-- destinations merges a PATCH into the stored row first).
UPDATE {schema}.destinations
SET url = $3, description = $4, events = $5, rate_limit = $6, metadata = $7, filter = $8
WHERE tenant = $1 AND id = $2
RETURNING updated_at

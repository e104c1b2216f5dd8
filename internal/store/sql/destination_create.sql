-- name: destination_create :one
-- params: id text, tenant text, url text, description text, events text[]
-- params: rate_limit double precision null, metadata jsonb as json.RawMessage, key_id text, sealed bytea
-- params: filter jsonb null
-- returns: created_at timestamptz, updated_at timestamptz
-- Creates destination $1 of tenant $2 (migration 016) with its first
-- signing secret, sealed by package destinations under key $8: both rows
-- in one statement. Its revision is set by the destinations_touch trigger;
-- its filter_path is compiled from filter $10 (migration 030).
WITH d AS (
    INSERT INTO {schema}.destinations (id, tenant, url, description, events, rate_limit, metadata, revision, filter)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $10)
    RETURNING created_at, updated_at
), s AS (
    INSERT INTO {schema}.destination_secrets (destination_id, serial, key_id, sealed) VALUES ($1, 1, $8, $9)
)
SELECT created_at, updated_at FROM d

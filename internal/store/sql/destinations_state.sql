-- name: destinations_state :one
-- returns: revision bigint, deletions bigint
-- What a relay polls to learn that destinations changed (migration 016's
-- destinations_state): one row.
SELECT revision, deletions FROM {schema}.destinations_state

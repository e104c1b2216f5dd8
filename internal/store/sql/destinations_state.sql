-- name: destinations_state :one
-- returns: revision bigint, deletions bigint, read_at timestamptz
-- What a relay polls to learn that destinations changed (migration 016's
-- destinations_state): one row, with the database time it was read at.
-- Every change committed before read_at is counted in it, so a row
-- enqueued before read_at names no change the read missed.
SELECT revision, deletions, now() AS read_at FROM {schema}.destinations_state

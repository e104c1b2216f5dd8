-- name: migrations_applied :many
-- returns: version integer
-- The versions of the migrations already applied.
SELECT version FROM {schema}.schema_migrations

-- name: migrations_applied :many
-- returns: version integer as int
-- The versions of the migrations already applied.
SELECT version FROM {schema}.schema_migrations

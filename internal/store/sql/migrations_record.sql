-- name: migrations_record :exec
-- params: version integer as int, name text
-- Records migration $1 named $2 as applied.
INSERT INTO {schema}.schema_migrations (version, name) VALUES ($1, $2)

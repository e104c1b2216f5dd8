-- name: migrations_ledger :many
-- returns: version integer as int, name text, applied_at timestamptz, checksum text null
-- The ledger of applied migrations in order, with the checksum each was
-- recorded with: NULL for those applied before migration 015 added the
-- column, and read through to_jsonb so that this also answers before 015
-- (a status of a schema that is behind).
SELECT m.version, m.name, m.applied_at, to_jsonb(m) ->> 'checksum'
FROM {schema}.schema_migrations m
ORDER BY m.version

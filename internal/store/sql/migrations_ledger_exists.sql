-- name: migrations_ledger_exists :one
-- params: ledger text
-- returns: exists boolean
-- Whether the migration ledger $1 (schema.schema_migrations) exists.
SELECT to_regclass($1) IS NOT NULL

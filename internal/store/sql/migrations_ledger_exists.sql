-- Whether the migration ledger $1 (schema.schema_migrations) exists.
SELECT to_regclass($1) IS NOT NULL

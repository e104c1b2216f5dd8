-- The versions of the migrations already applied.
SELECT version FROM {schema}.schema_migrations

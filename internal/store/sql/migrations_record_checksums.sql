-- name: migrations_record_checksums :exec
-- params: versions integer[] as []int, checksums text[] as []string
-- Records the checksum $2[i] of each migration $1[i] applied in this run
-- (migration 015's column exists by then).
UPDATE {schema}.schema_migrations m SET checksum = c.checksum
FROM unnest($1::integer[], $2::text[]) AS c(version, checksum)
WHERE m.version = c.version

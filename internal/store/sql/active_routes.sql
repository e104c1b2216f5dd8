-- name: active_routes :one
-- returns: version bigint, digest text
-- The version and digest of the routes publish() uses; no row when none
-- were ever applied.
SELECT rv.version, rv.digest
FROM {schema}.routes_active a
JOIN {schema}.route_versions rv ON rv.version = a.version

-- name: apply_routes :one
-- params: digest text, unmatched text, targets jsonb
-- returns: version bigint, changed boolean
-- Makes the routes with digest $1, unmatched policy $2 and targets $3 (a
-- JSON array, see appliedTarget) the ones publish() uses, through
-- apply_routes() of migration 003. Returns their version and whether the
-- active routes changed.
SELECT version, changed FROM {schema}.apply_routes($1, $2, $3)

-- name: destinations_list_all :many
-- capacity: limit
-- params: after text, limit bigint as int
-- returns: id text, tenant text, url text, description text, events text[], rate_limit double precision null
-- returns: enabled boolean, disabled_reason text, metadata jsonb as json.RawMessage, created_at timestamptz, updated_at timestamptz
-- returns: filter jsonb null
-- A page of every tenant's destinations in id order, as destinations_list
-- returns one tenant's (the operator console lists them without a tenant
-- filter): at most $2 with ids after $1 ('' starts at the first), walking
-- the primary key.
SELECT id, tenant, url, description, events, rate_limit, enabled, disabled_reason, metadata, created_at, updated_at, filter
FROM {schema}.destinations
WHERE id > $1
ORDER BY id
LIMIT $2

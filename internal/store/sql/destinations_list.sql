-- name: destinations_list :many
-- capacity: limit
-- params: tenant text, after text, limit bigint as int
-- returns: id text, tenant text, url text, description text, events text[], rate_limit double precision null
-- returns: enabled boolean, disabled_reason text, metadata jsonb as json.RawMessage, created_at timestamptz, updated_at timestamptz
-- returns: filter jsonb null
-- A page of tenant $1's destinations in id order: at most $3 with ids
-- after $2 ('' starts at the first), walking destinations_tenant_idx.
SELECT id, tenant, url, description, events, rate_limit, enabled, disabled_reason, metadata, created_at, updated_at, filter
FROM {schema}.destinations
WHERE tenant = $1 AND id > $2
ORDER BY id
LIMIT $3

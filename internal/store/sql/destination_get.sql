-- name: destination_get :one
-- params: tenant text, id text
-- returns: id text, tenant text, url text, description text, events text[], rate_limit double precision null
-- returns: enabled boolean, disabled_reason text, metadata jsonb as json.RawMessage, created_at timestamptz, updated_at timestamptz
-- returns: filter jsonb null
-- returns: waiting bigint
-- Destination $2 of tenant $1, with how many of its rows wait for
-- delivery (open, not in flight: while it is disabled they all wait),
-- counted on messages_destination_idx.
SELECT d.id, d.tenant, d.url, d.description, d.events, d.rate_limit, d.enabled, d.disabled_reason, d.metadata,
       d.created_at, d.updated_at, d.filter,
       (SELECT count(*) FROM {schema}.messages m
        WHERE (m.headers->>'outboxd-destination') = d.id AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
          AND m.status <> 'in_progress')
FROM {schema}.destinations d
WHERE d.tenant = $1 AND d.id = $2

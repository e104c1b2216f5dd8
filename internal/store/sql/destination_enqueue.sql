-- name: destination_enqueue :one
-- params: tenant text, id text, sink text, dedup_key text, payload jsonb as json.RawMessage
-- returns: id bigint, created boolean
-- Enqueues payload $5 for sink $3 addressed to destination $2 of tenant
-- $1 with enqueue_destination() (migration 016): the test event of the
-- console and the tenant portal. No row when the tenant has no such
-- destination, so a tenant reaches only its own.
SELECT e.id, e.created
FROM {schema}.destinations d
CROSS JOIN LATERAL {schema}.enqueue_destination($3, d.id, $4, $5) e
WHERE d.tenant = $1 AND d.id = $2

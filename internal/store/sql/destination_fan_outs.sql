-- name: destination_fan_outs :many
-- params: ids bigint[]
-- returns: id bigint, tenant text, destinations integer as int
-- What publish's fan-out (migration 016's destination_rows()) recorded on
-- the routed rows among ids $1: their tenant and how many destination
-- rows they made (0: no destination of the tenant subscribes to the
-- type). Rows of other targets are not returned. Probes the primary key.
SELECT m.id, m.receipt->>'tenant', (m.receipt->>'destinations')::int
FROM {schema}.messages m
WHERE m.id = ANY($1::bigint[]) AND m.route IS NOT NULL AND NOT m.headers ? 'outboxd-destination'
  AND m.receipt ? 'tenant' AND m.receipt ? 'destinations'

-- name: destination_tenant_notice :many
-- params: sink text, about text, event_type text, key text, data jsonb, include_about boolean
-- returns: destination text, id bigint, created boolean
-- Sends operational event $3 about destination $2 (outboxd.destination.
-- failing, recovered or disabled) to the destinations of $2's own tenant
-- whose patterns take the type, and to no other tenant's: one row each,
-- through enqueue_destination() on sink $1 (the sink whose breaker
-- changed, a sink of type destinations), in the caller's transaction, so
-- the event is sent if and only if the change that it reports commits.
-- The payload is the Standard Webhooks envelope {"type", "timestamp",
-- "data"}, the data $5 with the destination's id and description; each row's dedup key is $4 and the receiving destination,
-- so the same change reported twice is sent once. The destination the
-- event is about takes it only when $6 says so (recovered: news that it
-- is failing or disabled would wait behind that very state). A
-- destination subscribed to every type by having no patterns does not
-- take these events: a pattern must name them. Patterns
-- are matched as publish's fan-out matches them (migration 027), within
-- the same bounds, never raising.
SELECT d.id, e.id, e.created
FROM {schema}.destinations about
JOIN {schema}.destinations d ON d.tenant = about.tenant
CROSS JOIN {schema}.event_pattern_bounds() b
CROSS JOIN LATERAL {schema}.enqueue_destination($1, d.id, $4 || '/' || d.id,
    jsonb_build_object('type', $3::text, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', $5::jsonb || jsonb_build_object('destination', about.id, 'description', about.description))) e
WHERE about.id = $2
  AND (d.id <> about.id OR $6)
  AND d.events IS NOT NULL AND cardinality(d.events) > 0
  AND {schema}.event_patterns_match(d.events, $3, b.max_bytes, b.max_segments, b.max_patterns)
ORDER BY d.id

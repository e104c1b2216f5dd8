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
-- take these events: a pattern must name them. Patterns and payload
-- filters are matched as publish's fan-out matches them (migrations 027
-- and 030), within the same bounds, never raising: a filter on the
-- envelope's type or data picks which of these events an endpoint gets.
-- The takers are chosen before any row is enqueued (MATERIALIZED), so
-- the enqueue runs only for them.
WITH event AS (
    SELECT about.id AS about, about.tenant,
        jsonb_build_object('type', $3::text, 'timestamp', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'data', $5::jsonb || jsonb_build_object('destination', about.id, 'description', about.description)) AS payload
    FROM {schema}.destinations about
    WHERE about.id = $2
), takers AS MATERIALIZED (
    SELECT d.id, ev.payload
    FROM event ev
    JOIN {schema}.destinations d ON d.tenant = ev.tenant
    CROSS JOIN {schema}.event_pattern_bounds() b
    WHERE (d.id <> ev.about OR $6)
      AND d.events IS NOT NULL AND cardinality(d.events) > 0
      AND {schema}.event_patterns_match(d.events, $3, b.max_bytes, b.max_segments, b.max_patterns)
      AND (d.filter_path IS NULL OR jsonb_path_match(ev.payload, d.filter_path, '{}', true) IS TRUE)
)
SELECT t.id, e.id, e.created
FROM takers t
CROSS JOIN LATERAL {schema}.enqueue_destination($1, t.id, $4 || '/' || t.id, t.payload) e
ORDER BY t.id

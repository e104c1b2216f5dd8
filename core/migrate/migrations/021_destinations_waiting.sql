-- The rows waiting on a disabled destination (docs/destinations.md):
-- parked due at infinity by destination_set_enabled.sql, the fan-out and
-- enqueue_destination(), they are pending but no relay claims them until
-- the destination is enabled again.
--
-- The stats snapshot counts them per sink beside the pending ones
-- (take_stats_snapshot.sql), so that `outboxd stats`, GET /v1/stats and
-- the console show what waits and why, and no row is held without its
-- operator seeing it.
ALTER TABLE sink_stats ADD COLUMN waiting_disabled bigint NOT NULL DEFAULT 0;

-- A row parked while its destination is being enabled must not stay
-- parked. Enabling locks the destination's row, then moves its parked
-- rows in a statement of its own (destinations.Store.SetEnabled); a
-- producer that finds a matched destination disabled reads it again
-- under a share lock. So either the producer's lock comes first (the
-- enable waits for the producer's commit and then sees its row and moves
-- it), or the enable's (the producer waits for its commit and then finds
-- the destination enabled, its row due). A destination deleted meanwhile
-- gets no row. Enabled destinations are not locked: a publish takes no
-- lock on the destinations it delivers to.

-- destination_rows(), second definition (the first is migration 016's):
-- the disabled destinations among those matched are read again under a
-- share lock. Nothing else changes.
CREATE OR REPLACE FUNCTION destination_rows(routed messages) RETURNS int
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    parts  jsonb;
    tenant text;
    n      int;
BEGIN
    SELECT rt.tenant INTO parts FROM route_targets rt
    WHERE rt.version = routed.route_version AND rt.route = routed.route AND rt.sink = routed.sink;
    IF parts IS NULL THEN
        RETURN NULL;
    END IF;
    tenant := event_tenant(parts, routed.route, routed.payload->>'type', routed.payload->>'key', routed.payload->'data');
    WITH matched AS (
        SELECT f.id, f.enabled FROM fan_out_destinations(tenant, routed.payload->>'type') f
    ), disabled AS (
        SELECT d.id, d.enabled FROM destinations d
        WHERE d.id IN (SELECT m.id FROM matched m WHERE NOT m.enabled)
        FOR SHARE
    ), d AS (
        SELECT m.id, m.enabled FROM matched m WHERE m.enabled
        UNION ALL
        SELECT x.id, x.enabled FROM disabled x
    )
    INSERT INTO messages (sink, dedup_key, payload, headers, ordering_key, route, route_version, available_at, max_attempts)
    SELECT routed.sink, routed.dedup_key || '/' || d.id, routed.payload,
           routed.headers || jsonb_build_object('outboxd-destination', d.id),
           CASE WHEN routed.ordering_key IS NOT NULL THEN
               routed.sink || '/' || d.id || '/' || substr(routed.ordering_key, length(routed.sink) + 2) END,
           routed.route, routed.route_version,
           CASE WHEN d.enabled THEN routed.available_at ELSE 'infinity' END, routed.max_attempts
    FROM d
    ORDER BY d.id
    ON CONFLICT (sink, dedup_key) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE messages SET status = 'sent', sent_at = now(),
        receipt = jsonb_build_object('tenant', tenant, 'destinations', n)
    WHERE messages.id = routed.id;
    RETURN n;
END
$fn$;

-- enqueue_destination(), second definition (the first is migration
-- 016's): a destination found disabled is read again under a share lock.
-- Nothing else changes.
CREATE OR REPLACE FUNCTION enqueue_destination(
    sink         text,
    destination  text,
    dedup_key    text,
    payload      jsonb,
    ordering_key text  DEFAULT NULL,
    headers      jsonb DEFAULT NULL,
    OUT id       bigint,
    OUT created  boolean
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    is_enabled boolean;
BEGIN
    SELECT d.enabled INTO is_enabled FROM destinations d WHERE d.id = enqueue_destination.destination;
    IF FOUND AND NOT is_enabled THEN
        SELECT d.enabled INTO is_enabled FROM destinations d WHERE d.id = enqueue_destination.destination FOR SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('outbox: invalid message: no destination %s', to_json(enqueue_destination.destination));
    END IF;
    SELECT e.id, e.created INTO enqueue_destination.id, enqueue_destination.created
    FROM enqueue(enqueue_destination.sink, enqueue_destination.dedup_key, enqueue_destination.payload,
                 CASE WHEN coalesce(enqueue_destination.ordering_key, '') <> '' THEN
                     enqueue_destination.sink || '/' || enqueue_destination.destination || '/' || enqueue_destination.ordering_key END,
                 coalesce(enqueue_destination.headers, '{}') || jsonb_build_object('outboxd-destination', enqueue_destination.destination),
                 CASE WHEN NOT is_enabled THEN 'infinity'::timestamptz END) e;
END
$fn$;

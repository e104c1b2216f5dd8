-- Destinations as data (docs/destinations.md): a tenant's webhook
-- endpoints, created and changed at runtime through the API, each with its
-- own signing secrets, rate limit and breaker, delivered to by a sink of
-- type destinations. A route target {sink: customers, tenant: "..."} fans
-- a published event out to one row per destination of the event's tenant
-- subscribed to its type, in the producer's transaction.
--
-- A destination's row carries its destination in the header
-- outboxd-destination (the claim already returns headers, so the sink
-- reads it without a column of its own), its dedup key is the routed
-- row's plus "/<destination id>" (deduplicated per destination), and an
-- ordered event is ordered per destination (<sink>/<destination>/<key>).

CREATE TABLE destinations (
    id          text        PRIMARY KEY,
    tenant      text        NOT NULL CHECK (tenant <> '' AND octet_length(tenant) <= 255),
    url         text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    -- The subscribed event-type patterns as written (order.*, **) and as
    -- the anchored regular expressions publish matches against
    -- '.' || type (routing/pattern.go); NULL subscribes to every type.
    events      text[],
    patterns    text[],
    -- Deliveries per second; NULL takes the sink's default rate limit.
    rate_limit  double precision CHECK (rate_limit > 0),
    enabled     boolean     NOT NULL DEFAULT true,
    disabled_reason text    NOT NULL DEFAULT '',
    metadata    jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(metadata) = 'object'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- Set from destinations_revision on every change, so a relay reads
    -- only what changed since its last look.
    revision    bigint      NOT NULL
);
-- "The destinations of tenant T subscribed to type X" is one probe of
-- this index: a tenant's few rows, the patterns tested on them; enabled is
-- in it so the enabled ones are found without the heap.
CREATE INDEX destinations_tenant_idx ON destinations (tenant, id) INCLUDE (enabled, patterns);
CREATE INDEX destinations_revision_idx ON destinations (revision);

CREATE SEQUENCE destinations_revision;

-- Signing secrets, encrypted with AES-GCM by outboxd (package destinations)
-- under the key named key_id: a dump of the database alone does not reveal
-- them. A rotation sets the old secret's expires_at; until then both sign.
CREATE TABLE destination_secrets (
    destination_id text        NOT NULL REFERENCES destinations ON DELETE CASCADE,
    serial         int         NOT NULL,
    key_id         text        NOT NULL,
    sealed         bytea       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    PRIMARY KEY (destination_id, serial)
);
CREATE INDEX destination_secrets_key_idx ON destination_secrets (key_id);

-- What relays poll (at least every second): one row whose revision moves
-- on every change of a destination or its secrets and whose deletions
-- counts deleted destinations (a relay reloads everything then). A change
-- also notifies channel outboxd_destinations_<schema>, for relays that
-- listen.
CREATE TABLE destinations_state (
    singleton bool   PRIMARY KEY DEFAULT true CHECK (singleton),
    revision  bigint NOT NULL DEFAULT 0,
    deletions bigint NOT NULL DEFAULT 0
);
INSERT INTO destinations_state DEFAULT VALUES;

-- A change takes its revision while holding destinations_state's row
-- lock, kept until it commits: revisions are handed out in the order the
-- changes commit, so a relay that has read revision n has seen every
-- change numbered below it (a sequence alone could commit 5 after 6).
CREATE FUNCTION destinations_touch() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    UPDATE destinations_state SET revision = nextval('destinations_revision') RETURNING revision INTO NEW.revision;
    NEW.updated_at := now();
    RETURN NEW;
END
$fn$;
CREATE TRIGGER destinations_touch BEFORE INSERT OR UPDATE ON destinations
    FOR EACH ROW EXECUTE FUNCTION destinations_touch();

CREATE FUNCTION destinations_changed() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE destinations_state SET deletions = deletions + 1;
    END IF;
    PERFORM pg_notify('outboxd_destinations_' || current_schema(), '');
    RETURN NULL;
END
$fn$;
CREATE TRIGGER destinations_changed AFTER INSERT OR UPDATE OR DELETE ON destinations
    FOR EACH STATEMENT EXECUTE FUNCTION destinations_changed();

-- The open rows of one destination (disable, enable, delete, stats), and
-- all its rows newest first (its recent deliveries). Only destination
-- rows are in them; a claim changes no column they read, so it stays a
-- HOT update.
CREATE INDEX messages_destination_idx ON messages ((headers->>'outboxd-destination'), id)
    WHERE phase = 'open' AND headers ? 'outboxd-destination';
CREATE INDEX messages_destination_all_idx ON messages ((headers->>'outboxd-destination'), id)
    WHERE headers ? 'outboxd-destination';

-- A route target's tenant template, as parts like thread_key's
-- (routing/threadkey.go); NULL for a target that does not fan out.
ALTER TABLE route_targets ADD COLUMN tenant jsonb;

-- apply_routes(), second definition (the first is migration 003's): it
-- stores each target's tenant template too. Nothing else changes.
CREATE OR REPLACE FUNCTION apply_routes(digest text, unmatched text, targets jsonb, OUT version bigint, OUT changed boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    previous bigint;
BEGIN
    SELECT a.version INTO previous FROM routes_active a FOR UPDATE;
    SELECT rv.version INTO apply_routes.version FROM route_versions rv WHERE rv.digest = apply_routes.digest;
    IF FOUND AND apply_routes.version = previous THEN
        changed := false;
        RETURN;
    END IF;
    IF apply_routes.version IS NULL THEN
        INSERT INTO route_versions (digest, unmatched) VALUES (apply_routes.digest, apply_routes.unmatched)
        RETURNING route_versions.version INTO apply_routes.version;
        INSERT INTO route_targets (version, route, sink, position, patterns, thread_key, template, update_root, tenant)
        SELECT apply_routes.version, t.route, t.sink, t.position,
               ARRAY(SELECT jsonb_array_elements_text(t.patterns)), t.thread_key, t.template, coalesce(t.update_root, false), t.tenant
        FROM jsonb_to_recordset(apply_routes.targets)
            AS t(route text, sink text, position int, patterns jsonb, thread_key jsonb, template jsonb, update_root bool, tenant jsonb);
    END IF;
    INSERT INTO route_matches (version, event_type, routes, sinks)
    SELECT apply_routes.version, seen.event_type, r.routes, r.sinks
    FROM (SELECT DISTINCT m.event_type FROM route_matches m WHERE m.version = previous) seen
    CROSS JOIN LATERAL route_match(apply_routes.version, seen.event_type) r
    WHERE NOT EXISTS (SELECT FROM route_matches m WHERE m.version = apply_routes.version AND m.event_type = seen.event_type);
    DELETE FROM route_matches m WHERE m.version <> apply_routes.version;
    UPDATE routes_active SET version = apply_routes.version;
    changed := true;
END
$fn$;

-- Raises event_tenant()'s error (a SQL function cannot RAISE).
CREATE FUNCTION outbox_raise_missing_tenant(route text, path text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('outbox: invalid event: route %s takes its tenant from .data.%s, which the event lacks', route, path);
END
$fn$;

-- The tenant a target's template (parts) makes of an event; a part the
-- event lacks is an error naming the route and the missing field.
CREATE FUNCTION event_tenant(parts jsonb, route text, type text, key text, data jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $fn$
    SELECT CASE
        WHEN bool_or(p.value IS NULL) THEN outbox_raise_missing_tenant(route, (array_agg(p.path) FILTER (WHERE p.value IS NULL))[1])
        ELSE nullif(string_agg(p.value, '' ORDER BY p.ord), '')
    END
    FROM jsonb_array_elements(parts) WITH ORDINALITY AS e(part, ord)
    CROSS JOIN LATERAL (SELECT e.ord,
        CASE WHEN e.part ? 'text' THEN e.part->>'text'
             WHEN e.part->>'field' = 'type' THEN type
             WHEN e.part->>'field' = 'key' THEN key
             ELSE data #>> ARRAY(SELECT jsonb_array_elements_text(e.part->'data')) END AS value,
        array_to_string(ARRAY(SELECT jsonb_array_elements_text(e.part->'data')), '.') AS path) p
$fn$;


-- fan_out_destinations(): the destinations of tenant that subscribe to
-- event type type, enabled or not (a disabled one's row waits), from one
-- probe of destinations_tenant_idx.
CREATE FUNCTION fan_out_destinations(tenant text, type text)
RETURNS TABLE (id text, enabled boolean)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $fn$
    SELECT d.id, d.enabled FROM destinations d
    WHERE d.tenant = fan_out_destinations.tenant
      AND (d.patterns IS NULL OR EXISTS (SELECT FROM unnest(d.patterns) p WHERE '.' || type ~ p))
$fn$;

-- destination_rows(): turns a routed row of a target with a tenant
-- template into one row per destination fan_out_destinations() finds, in
-- the same transaction, and marks the routed row itself sent with the
-- receipt {"tenant", "destinations": n} (0: no destination matched, so
-- nothing was created for the tenant). A disabled destination's row is
-- due at infinity: it waits, and enabling the destination makes it due.
-- Returns how many destination rows it created.
CREATE FUNCTION destination_rows(routed messages) RETURNS int
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
    INSERT INTO messages (sink, dedup_key, payload, headers, ordering_key, route, route_version, available_at, max_attempts)
    SELECT routed.sink, routed.dedup_key || '/' || d.id, routed.payload,
           routed.headers || jsonb_build_object('outboxd-destination', d.id),
           CASE WHEN routed.ordering_key IS NOT NULL THEN
               routed.sink || '/' || d.id || '/' || substr(routed.ordering_key, length(routed.sink) + 2) END,
           routed.route, routed.route_version,
           CASE WHEN d.enabled THEN routed.available_at ELSE 'infinity' END, routed.max_attempts
    FROM fan_out_destinations(tenant, routed.payload->>'type') d
    ORDER BY d.id
    ON CONFLICT (sink, dedup_key) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    UPDATE messages SET status = 'sent', sent_at = now(),
        receipt = jsonb_build_object('tenant', tenant, 'destinations', n)
    WHERE messages.id = routed.id;
    RETURN n;
END
$fn$;

-- Every published row passes through destination_rows(), whatever
-- publish_batch() definition wrote it; rows already addressed to a
-- destination and rows enqueued directly (no route) do not.
CREATE FUNCTION messages_fan_out() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    PERFORM destination_rows(NEW);
    RETURN NULL;
END
$fn$;
CREATE TRIGGER messages_fan_out AFTER INSERT ON messages
    FOR EACH ROW WHEN (NEW.route_version IS NOT NULL AND NOT NEW.headers ? 'outboxd-destination')
    EXECUTE FUNCTION messages_fan_out();

-- enqueue_destination(): enqueue() addressed to one destination of a
-- destinations sink: the row carries the destination, waits while it is
-- disabled, and an unknown destination is refused (SQLSTATE 22023).
CREATE FUNCTION enqueue_destination(
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

-- Events, routes and threads (docs/events.md).
--
-- A producer publishes an event {type, key, data} with publish(); the
-- routes applied last (outboxd routes apply, or outboxd migrate) turn it
-- into one ordinary row per matched target, in the producer's transaction.
-- The relay renders each row with its route's template at delivery time.

-- What a published row remembers beyond an enqueued one.
ALTER TABLE messages
    -- The route that published the row; NULL for a message enqueued
    -- directly. Its payload is then the event {type, key, data}.
    ADD COLUMN route text,
    -- Rows of one sink sharing a thread key form one conversation: the
    -- first delivered is the thread's root (see threads), and they are
    -- delivered in order (their ordering_key is derived from it).
    ADD COLUMN thread_key text;

-- One row per distinct set of routes ever applied.
CREATE TABLE route_versions (
    version    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- sha256 of the routes as applied: applying the same routes again
    -- finds their version instead of making a new one.
    digest     text        NOT NULL UNIQUE,
    -- What publish() does with an event no route matches: raise an error,
    -- or drop it and count it in events_dropped.
    unmatched  text        NOT NULL CHECK (unmatched IN ('error', 'drop')),
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- The version publish() uses: exactly one row. Applying routes updates it,
-- so concurrent applies queue on its row lock while publishers, which only
-- read it, never wait.
CREATE TABLE routes_active (
    singleton bool PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint REFERENCES route_versions
);
INSERT INTO routes_active DEFAULT VALUES;

-- The targets of every route of every version.
CREATE TABLE route_targets (
    version     bigint NOT NULL REFERENCES route_versions,
    route       text   NOT NULL,
    sink        text   NOT NULL,
    -- Where the target stands in its route's list, for a stable order.
    position    int    NOT NULL,
    -- The route's event patterns as anchored regular expressions matched
    -- against '.' || type (see routing/pattern.go).
    patterns    text[] NOT NULL,
    -- The target's thread_key template as parts evaluated by
    -- event_thread_key(); NULL when the template sets none.
    thread_key  jsonb,
    -- The target's template and update_root as configured, for a relay
    -- whose configuration lacks the route (during a rolling deploy).
    template    jsonb,
    update_root bool   NOT NULL DEFAULT false,
    PRIMARY KEY (version, route, sink)
);

-- The targets an event type resolves to under a version, computed by
-- publish() the first time it sees the type and by apply_routes() for the
-- types seen before, so matching costs one index probe per event, however
-- many routes there are. Deliberately not unique: a unique key would make a
-- publisher wait for another transaction that resolved the same type first
-- until it commits; two transactions seeing a new type at once each store
-- the same answer, and publish() reads either.
CREATE TABLE route_matches (
    version    bigint NOT NULL,
    event_type text   NOT NULL,
    -- The matched targets, by route then position: routes[i] -> sinks[i].
    routes     text[] NOT NULL,
    sinks      text[] NOT NULL
);
CREATE INDEX route_matches_type_idx ON route_matches (version, event_type);

-- Events dropped because no route matched (routes_unmatched: drop), one row
-- each: an insert never waits for another transaction. Maintenance folds
-- them into events_dropped_totals.
CREATE TABLE events_dropped (
    event_type text        NOT NULL,
    dropped_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE events_dropped_totals (
    event_type text   PRIMARY KEY,
    dropped    bigint NOT NULL
);

-- One row per conversation of a sink: the receipt of its first delivered
-- row (Slack: channel and ts), written by the relay's terminal write and
-- kept after that row is pruned. Later rows of the thread get the receipt
-- at claim time (Delivery.ThreadRoot). Threads idle for longer than the
-- thread retention are pruned; a later event of the key starts anew.
CREATE TABLE threads (
    sink         text        NOT NULL,
    thread_key   text        NOT NULL,
    root_id      bigint      NOT NULL,
    root_receipt jsonb       NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_sent_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sink, thread_key)
);
CREATE INDEX threads_last_sent_idx ON threads (last_sent_at);

-- Cluster-wide rate limits per destination key (rate_limit.per_key): one
-- GCRA row per sink and key, like sink_limits per sink. A row whose tat
-- has passed means the same as no row, so maintenance deletes those and
-- the table holds only the keys busy right now.
CREATE TABLE sink_key_limits (
    sink text        NOT NULL,
    key  text        NOT NULL,
    tat  timestamptz NOT NULL,
    PRIMARY KEY (sink, key)
);

-- The targets event type `type` resolves to under route version v.
CREATE FUNCTION route_match(v bigint, type text, OUT routes text[], OUT sinks text[])
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $fn$
    SELECT coalesce(array_agg(t.route ORDER BY t.route, t.position), '{}'),
           coalesce(array_agg(t.sink ORDER BY t.route, t.position), '{}')
    FROM route_targets t
    WHERE t.version = v
      AND EXISTS (SELECT FROM unnest(t.patterns) p WHERE '.' || type ~ p)
$fn$;

-- Evaluates a target's thread_key template (parts: {"text": "..."},
-- {"field": "type"}, {"field": "key"} or {"data": ["path", "to", "value"]})
-- against an event. A part the event lacks is an error, like a missing
-- key in a template; an empty result means no thread.
CREATE FUNCTION event_thread_key(parts jsonb, route text, type text, key text, data jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $fn$
DECLARE
    part  jsonb;
    value text;
    out   text := '';
BEGIN
    IF parts IS NULL THEN
        RETURN NULL;
    END IF;
    FOR part IN SELECT * FROM jsonb_array_elements(parts) LOOP
        value := CASE
            WHEN part ? 'text' THEN part->>'text'
            WHEN part->>'field' = 'type' THEN type
            WHEN part->>'field' = 'key' THEN key
            ELSE data #>> ARRAY(SELECT jsonb_array_elements_text(part->'data'))
        END;
        IF value IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('outbox: invalid event: route %s takes its thread_key from .data.%s, which the event lacks',
                                 route, array_to_string(ARRAY(SELECT jsonb_array_elements_text(part->'data')), '.'));
        END IF;
        out := out || value;
    END LOOP;
    RETURN nullif(out, '');
END
$fn$;

-- publish(): turn an event into one row per target of the routes that
-- match its type, usable inside the caller's transaction from any language:
--
--   SELECT * FROM outbox.publish('order.created', 'order-42', '{"id": 42}');
--   SELECT * FROM outbox.publish(type => 'incident.resolved', key => 'inc-7-resolved',
--       data => '{"id": 7}', thread_key => 'inc-7');
--
-- Each row is an ordinary message: own attempts, backoff, rate limit and
-- dead letter. Its dedup key is type/key/route, so publishing the same
-- (type, key) again creates nothing; the answer lists every target's row,
-- with created false for the ones that existed. A row with a thread key is
-- ordered by it, else by ordering_key; both are scoped to the row's sink,
-- so a slow sink never holds up another sink's rows. headers (an object of
-- strings) carry trace context to the relay.
--
-- Bad input raises SQLSTATE 22023 with a message starting "outbox: invalid
-- event: "; an event no route matches raises P0002 ("outbox: no route
-- matches event type ...") unless the routes say routes_unmatched: drop,
-- when it returns no rows and is counted in events_dropped.
CREATE FUNCTION publish(
    type         text,
    key          text,
    data         jsonb,
    ordering_key text  DEFAULT NULL,
    thread_key   text  DEFAULT NULL,
    headers      jsonb DEFAULT NULL
) RETURNS TABLE (sink text, id bigint, created boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    -- core.DefaultMaxPayloadBytes and core.MaxDedupKeyBytes.
    max_payload_bytes CONSTANT int := 262144;
    max_key_bytes     CONSTANT int := 255;
    prefix            CONSTANT text := 'outbox: invalid event: ';
    event_type_re     CONSTANT text := '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$';
    control_re        CONSTANT text := '[\u0001-\u001f\u007f-\u009f\ufffd]';
    k            record;
    v            bigint;
    policy       text;
    m_routes     text[];
    m_sinks      text[];
    payload      jsonb;
    t_sinks      text[];
    t_keys       text[];
    t_routes     text[];
    t_threads    text[];
    t_orderings  text[];
    -- The rows this call created.
    c_sinks      text[] := '{}';
    c_keys       text[] := '{}';
    c_ids        bigint[] := '{}';
BEGIN
    IF coalesce(publish.type, '') !~ event_type_re OR octet_length(publish.type) > max_key_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%stype %s is not a dotted name of letters, digits, "_" and "-" of at most %s bytes',
                             prefix, coalesce(to_json(publish.type)::text, 'NULL'), max_key_bytes);
    END IF;
    FOR k IN SELECT * FROM (VALUES ('key', publish.key, true), ('ordering_key', publish.ordering_key, false),
                                   ('thread_key', publish.thread_key, false)) AS k(what, value, required)
    LOOP
        CONTINUE WHEN NOT k.required AND coalesce(k.value, '') = '';
        IF coalesce(k.value, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || k.what || ' is empty';
        END IF;
        IF octet_length(k.value) > max_key_bytes THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s is %s bytes, over the limit of %s', prefix, k.what, octet_length(k.value), max_key_bytes);
        END IF;
        IF k.value ~ control_re THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s %s holds a control character', prefix, k.what, to_json(k.value));
        END IF;
    END LOOP;
    IF publish.data IS NULL OR jsonb_typeof(publish.data) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%sdata must be a JSON object, got %s', prefix, coalesce(jsonb_typeof(publish.data), 'NULL'));
    END IF;
    IF publish.headers IS NOT NULL AND (jsonb_typeof(publish.headers) <> 'object' OR EXISTS (
        SELECT FROM jsonb_each(publish.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || 'headers must be a JSON object of strings';
    END IF;
    payload := jsonb_build_object('type', publish.type, 'key', publish.key, 'data', publish.data);
    IF octet_length(payload::text) > max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%sthe event is %s bytes, over the limit of %s', prefix, octet_length(payload::text), max_payload_bytes);
    END IF;

    SELECT a.version, rv.unmatched INTO v, policy
    FROM routes_active a JOIN route_versions rv ON rv.version = a.version;
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('outbox: no routes are applied to schema %s', current_schema()),
            HINT = 'Apply the routes of plugins.yaml with outboxd routes apply (outboxd migrate does it too).';
    END IF;
    SELECT c.routes, c.sinks INTO m_routes, m_sinks
    FROM route_matches c WHERE c.version = v AND c.event_type = publish.type LIMIT 1;
    IF NOT FOUND THEN
        SELECT r.routes, r.sinks INTO m_routes, m_sinks FROM route_match(v, publish.type) r;
        INSERT INTO route_matches (version, event_type, routes, sinks) VALUES (v, publish.type, m_routes, m_sinks);
    END IF;
    IF cardinality(m_routes) = 0 THEN
        IF policy = 'drop' THEN
            INSERT INTO events_dropped (event_type) VALUES (publish.type);
            RETURN;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('outbox: no route matches event type %s', publish.type),
            HINT = 'Add a route for it to plugins.yaml and apply the routes, or set routes_unmatched: drop.';
    END IF;

    -- Each target's row: its thread key (the target's template's, else the
    -- event's), dedup key and ordering key.
    SELECT array_agg(t.sink ORDER BY t.ord), array_agg(t.dedup_key ORDER BY t.ord), array_agg(t.route ORDER BY t.ord),
           array_agg(t.thread ORDER BY t.ord),
           array_agg(t.sink || '/' || coalesce(t.thread, nullif(publish.ordering_key, '')) ORDER BY t.ord)
    INTO t_sinks, t_keys, t_routes, t_threads, t_orderings
    FROM (
        SELECT m.ord, m.sink, m.route, publish.type || '/' || publish.key || '/' || m.route AS dedup_key,
               coalesce(event_thread_key(rt.thread_key, m.route, publish.type, publish.key, publish.data),
                        nullif(publish.thread_key, '')) AS thread
        FROM unnest(m_routes, m_sinks) WITH ORDINALITY AS m(route, sink, ord)
        JOIN route_targets rt ON rt.version = v AND rt.route = m.route AND rt.sink = m.sink
    ) t;

    -- Insert, or find the rows that hold the keys. The lookup is a
    -- statement of its own so that, under READ COMMITTED, it sees rows a
    -- concurrent transaction committed after the insert's snapshot; if one
    -- of them is deleted in between (retention), the loop inserts again.
    LOOP
        WITH ins AS (
            INSERT INTO messages AS m (sink, dedup_key, payload, headers, ordering_key, route, thread_key)
            SELECT t.sink, t.dedup_key, payload, coalesce(publish.headers, '{}'), t.ordering, t.route, t.thread
            FROM unnest(t_sinks, t_keys, t_orderings, t_routes, t_threads) WITH ORDINALITY
                AS t(sink, dedup_key, ordering, route, thread, ord)
            ORDER BY t.ord
            ON CONFLICT (sink, dedup_key) DO NOTHING
            RETURNING m.sink, m.dedup_key, m.id
        ), notified AS (
            -- Transactional: relays hear it on commit, and the
            -- notifications of one transaction fold into one.
            SELECT pg_notify(current_schema() || '_outbox_wakeup', '') FROM ins LIMIT 1
        )
        SELECT c_sinks || coalesce(array_agg(ins.sink), '{}'), c_keys || coalesce(array_agg(ins.dedup_key), '{}'),
               c_ids || coalesce(array_agg(ins.id), '{}')
        INTO c_sinks, c_keys, c_ids
        FROM ins LEFT JOIN notified ON true;
        EXIT WHEN cardinality(c_ids) = cardinality(t_sinks) OR NOT EXISTS (
            SELECT FROM unnest(t_sinks, t_keys) AS t(sink, dedup_key)
            WHERE NOT EXISTS (SELECT FROM messages m WHERE m.sink = t.sink AND m.dedup_key = t.dedup_key));
    END LOOP;
    RETURN QUERY
        SELECT t.sink,
               coalesce(c.id, (SELECT m.id FROM messages m WHERE m.sink = t.sink AND m.dedup_key = t.dedup_key)),
               c.id IS NOT NULL
        FROM unnest(t_sinks, t_keys) WITH ORDINALITY AS t(sink, dedup_key, ord)
        LEFT JOIN unnest(c_sinks, c_keys, c_ids) AS c(sink, dedup_key, id)
            ON c.sink = t.sink AND c.dedup_key = t.dedup_key
        ORDER BY t.ord;
END
$fn$;

-- apply_routes(): make the routes whose sha256 is digest the ones publish()
-- uses, storing them as a new version unless they were applied before.
-- targets is a JSON array of {route, sink, position, patterns, thread_key,
-- template, update_root} (see routing.Apply). Returns the version and
-- whether the active routes changed; applying the active routes again
-- changes nothing. The event types seen under the previous version are
-- resolved for the new one at once, so publishers of known types keep
-- finding their targets with one index probe.
CREATE FUNCTION apply_routes(digest text, unmatched text, targets jsonb, OUT version bigint, OUT changed boolean)
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
        INSERT INTO route_targets (version, route, sink, position, patterns, thread_key, template, update_root)
        SELECT apply_routes.version, t.route, t.sink, t.position,
               ARRAY(SELECT jsonb_array_elements_text(t.patterns)), t.thread_key, t.template, coalesce(t.update_root, false)
        FROM jsonb_to_recordset(apply_routes.targets)
            AS t(route text, sink text, position int, patterns jsonb, thread_key jsonb, template jsonb, update_root bool);
    END IF;
    INSERT INTO route_matches (version, event_type, routes, sinks)
    SELECT apply_routes.version, seen.event_type, r.routes, r.sinks
    FROM (SELECT DISTINCT m.event_type FROM route_matches m WHERE m.version = previous) seen
    CROSS JOIN LATERAL route_match(apply_routes.version, seen.event_type) r
    WHERE NOT EXISTS (SELECT FROM route_matches m WHERE m.version = apply_routes.version AND m.event_type = seen.event_type);
    -- Only the active version's answers are read from now on.
    DELETE FROM route_matches m WHERE m.version <> apply_routes.version;
    UPDATE routes_active SET version = apply_routes.version;
    changed := true;
END
$fn$;

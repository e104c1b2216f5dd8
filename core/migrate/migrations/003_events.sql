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

-- publish_batch(): turn events into one row per target of the routes that
-- match their types, in one call however many events and targets, usable
-- inside the caller's transaction from any language. The arrays hold one
-- entry per event (NULL or '' for no ordering or thread key); headers (an
-- object of strings: trace context) go with every row. Returns every
-- target's row with its event's index (from 1), in event order and, per
-- event, in route order.
--
-- Each row is an ordinary message: own attempts, backoff, rate limit and
-- dead letter. Its dedup key is type/key/route, so publishing the same
-- (type, key) again creates nothing; the answer lists every target's row,
-- with created false for the ones that existed. A row with a thread key
-- (the target template's, else the event's) is ordered by it, else by the
-- event's ordering_key; both are scoped to the row's sink, so a slow sink
-- never holds up another sink's rows.
--
-- Bad input raises SQLSTATE 22023 with a message starting "outbox: invalid
-- event: " (naming the event's index in a batch of several); an event no
-- route matches raises P0002 ("outbox: no route matches event type ...")
-- unless the routes say routes_unmatched: drop, when it makes no rows and
-- is counted in events_dropped. Nothing is written when one event fails.
--
-- Plans are generic: custom plans would be made anew on every call for
-- these few-row statements, which cost more than running them.
CREATE FUNCTION publish_batch(
    types         text[],
    keys          text[],
    data          jsonb[],
    ordering_keys text[] DEFAULT NULL,
    thread_keys   text[] DEFAULT NULL,
    headers       jsonb  DEFAULT NULL
) RETURNS TABLE (event int, sink text, id bigint, created boolean)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $fn$
#variable_conflict use_column
DECLARE
    -- core.DefaultMaxPayloadBytes and core.MaxDedupKeyBytes.
    max_payload_bytes CONSTANT int := 262144;
    max_key_bytes     CONSTANT int := 255;
    event_type_re     CONSTANT text := '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$';
    control_re        CONSTANT text := '[\u0001-\u001f\u007f-\u009f\ufffd]';
    n          int := cardinality(publish_batch.types);
    bad        record;
    v          bigint;
    policy     text;
    unmatched  record;
    -- The rows to write, one entry each.
    r_events   int[];
    r_sinks    text[];
    r_keys     text[];
    r_routes   text[];
    r_threads  text[];
    r_orders   text[];
    r_payloads jsonb[];
    -- The rows this call created.
    c_sinks    text[] := '{}';
    c_keys     text[] := '{}';
    c_ids      bigint[] := '{}';
BEGIN
    IF coalesce(n, 0) = 0 THEN
        RETURN;
    END IF;
    IF cardinality(publish_batch.keys) IS DISTINCT FROM n OR cardinality(publish_batch.data) IS DISTINCT FROM n
       OR coalesce(cardinality(publish_batch.ordering_keys), n) <> n OR coalesce(cardinality(publish_batch.thread_keys), n) <> n THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'outbox: invalid event: types, keys, data, ordering_keys and thread_keys must have one entry per event';
    END IF;
    SELECT e.ord, e.problem INTO bad FROM (
        SELECT e.ord, CASE
            WHEN coalesce(e.type, '') !~ event_type_re OR octet_length(e.type) > max_key_bytes THEN
                format('type %s is not a dotted name of letters, digits, "_" and "-" of at most %s bytes', coalesce(to_json(e.type)::text, 'NULL'), max_key_bytes)
            WHEN coalesce(e.key, '') = '' THEN 'key is empty'
            WHEN octet_length(e.key) > max_key_bytes THEN format('key is %s bytes, over the limit of %s', octet_length(e.key), max_key_bytes)
            WHEN e.key ~ control_re THEN format('key %s holds a control character', to_json(e.key))
            WHEN octet_length(e.ordering_key) > max_key_bytes THEN format('ordering_key is %s bytes, over the limit of %s', octet_length(e.ordering_key), max_key_bytes)
            WHEN e.ordering_key ~ control_re THEN format('ordering_key %s holds a control character', to_json(e.ordering_key))
            WHEN octet_length(e.thread_key) > max_key_bytes THEN format('thread_key is %s bytes, over the limit of %s', octet_length(e.thread_key), max_key_bytes)
            WHEN e.thread_key ~ control_re THEN format('thread_key %s holds a control character', to_json(e.thread_key))
            WHEN e.data IS NULL OR jsonb_typeof(e.data) <> 'object' THEN format('data must be a JSON object, got %s', coalesce(jsonb_typeof(e.data), 'NULL'))
            WHEN octet_length(e.data::text) > max_payload_bytes THEN format('data is %s bytes, over the limit of %s', octet_length(e.data::text), max_payload_bytes)
        END AS problem
        FROM unnest(publish_batch.types, publish_batch.keys, publish_batch.data, publish_batch.ordering_keys, publish_batch.thread_keys)
            WITH ORDINALITY AS e(type, key, data, ordering_key, thread_key, ord)
    ) e WHERE e.problem IS NOT NULL ORDER BY e.ord LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'outbox: invalid event: ' || CASE WHEN n > 1 THEN format('event %s: ', bad.ord) ELSE '' END || bad.problem;
    END IF;
    IF publish_batch.headers IS NOT NULL AND (jsonb_typeof(publish_batch.headers) <> 'object' OR EXISTS (
        SELECT FROM jsonb_each(publish_batch.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'outbox: invalid event: headers must be a JSON object of strings';
    END IF;

    SELECT a.version, rv.unmatched INTO v, policy
    FROM routes_active a JOIN route_versions rv ON rv.version = a.version;
    IF v IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('outbox: no routes are applied to schema %s', current_schema()),
            HINT = 'Apply the routes of plugins.yaml with outboxd routes apply (outboxd migrate does it too).';
    END IF;

    -- Each event's targets (resolving types not seen before under this
    -- version) and each target's row: thread key, dedup key, ordering key.
    WITH events AS (
        SELECT * FROM unnest(publish_batch.types, publish_batch.keys, publish_batch.data,
                             publish_batch.ordering_keys, publish_batch.thread_keys)
            WITH ORDINALITY AS e(type, key, data, ordering_key, thread_key, ord)
    ), missing AS (
        INSERT INTO route_matches (version, event_type, routes, sinks)
        SELECT v, t.type, r.routes, r.sinks
        FROM (SELECT DISTINCT e.type FROM events e
              WHERE NOT EXISTS (SELECT FROM route_matches c WHERE c.version = v AND c.event_type = e.type)) t
        CROSS JOIN LATERAL route_match(v, t.type) r
        RETURNING route_matches.event_type, route_matches.routes, route_matches.sinks
    ), matched AS (
        SELECT e.*, m.routes, m.sinks
        FROM events e
        CROSS JOIN LATERAL (
            SELECT c.routes, c.sinks FROM route_matches c WHERE c.version = v AND c.event_type = e.type
            UNION ALL
            SELECT x.routes, x.sinks FROM missing x WHERE x.event_type = e.type
            LIMIT 1) m
    ), targets AS (
        SELECT m.ord, u.n, u.route, u.sink, m.type, m.key, m.data, m.ordering_key,
               coalesce(event_thread_key(rt.thread_key, u.route, m.type, m.key, m.data), nullif(m.thread_key, '')) AS thread
        FROM matched m
        CROSS JOIN LATERAL unnest(m.routes, m.sinks) WITH ORDINALITY AS u(route, sink, n)
        JOIN route_targets rt ON rt.version = v AND rt.route = u.route AND rt.sink = u.sink
    ), targets_in_order AS (
        SELECT * FROM targets ORDER BY ord, n
    )
    SELECT array_agg(t.ord), array_agg(t.sink), array_agg(t.type || '/' || t.key || '/' || t.route), array_agg(t.route),
           array_agg(t.thread), array_agg(t.sink || '/' || coalesce(t.thread, nullif(t.ordering_key, ''))),
           array_agg(jsonb_build_object('type', t.type, 'key', t.key, 'data', t.data))
    INTO r_events, r_sinks, r_keys, r_routes, r_threads, r_orders, r_payloads
    FROM targets_in_order t;

    SELECT min(e.ord) AS ord, count(*) AS events, (array_agg(e.type ORDER BY e.ord))[1] AS type, array_agg(e.type) AS types INTO unmatched
    FROM unnest(publish_batch.types) WITH ORDINALITY AS e(type, ord)
    WHERE e.ord <> ALL (coalesce(r_events, '{}'));
    IF unmatched.events > 0 THEN
        IF policy = 'error' THEN
            RAISE EXCEPTION USING ERRCODE = 'no_data_found',
                MESSAGE = 'outbox: ' || CASE WHEN n > 1 THEN format('event %s: ', unmatched.ord) ELSE '' END
                    || format('no route matches event type %s', unmatched.type),
                HINT = 'Add a route for it to plugins.yaml and apply the routes, or set routes_unmatched: drop.';
        END IF;
        INSERT INTO events_dropped (event_type) SELECT unnest(unmatched.types);
    END IF;
    IF r_events IS NULL THEN
        RETURN;
    END IF;

    -- Insert, or find the rows that hold the keys. The lookup is a
    -- statement of its own so that, under READ COMMITTED, it sees rows a
    -- concurrent transaction committed after the insert's snapshot; if one
    -- of them is deleted in between (retention), the loop inserts again.
    LOOP
        WITH ins AS (
            INSERT INTO messages AS m (sink, dedup_key, payload, headers, ordering_key, route, thread_key)
            SELECT r.sink, r.dedup_key, r.payload, coalesce(publish_batch.headers, '{}'), r.ordering, r.route, r.thread
            FROM unnest(r_sinks, r_keys, r_payloads, r_orders, r_routes, r_threads) WITH ORDINALITY
                AS r(sink, dedup_key, payload, ordering, route, thread, ord)
            ORDER BY r.ord
            ON CONFLICT (sink, dedup_key) DO NOTHING
            RETURNING m.sink, m.dedup_key, m.id
        ), notified AS (
            -- wake() (migration 006) notifies a relay loop waiting for
            -- each sink's rows, if any; it hears it on commit.
            -- One row, so that joining it repeats no inserted row.
            SELECT count(*) FROM (SELECT wake(w.sink) FROM (SELECT DISTINCT ins.sink FROM ins) w) woken
        )
        SELECT c_sinks || coalesce(array_agg(ins.sink), '{}'), c_keys || coalesce(array_agg(ins.dedup_key), '{}'),
               c_ids || coalesce(array_agg(ins.id), '{}')
        INTO c_sinks, c_keys, c_ids
        FROM ins LEFT JOIN notified ON true;
        EXIT WHEN cardinality(c_ids) = cardinality(r_sinks) OR NOT EXISTS (
            SELECT FROM unnest(r_sinks, r_keys) AS r(sink, dedup_key)
            WHERE NOT EXISTS (SELECT FROM messages m WHERE m.sink = r.sink AND m.dedup_key = r.dedup_key));
    END LOOP;
    -- A key repeated within the batch was created by its first event only.
    RETURN QUERY
        SELECT r.event, r.sink,
               coalesce(c.id, (SELECT m.id FROM messages m WHERE m.sink = r.sink AND m.dedup_key = r.dedup_key)),
               c.id IS NOT NULL AND r.first
        FROM (SELECT r.*, row_number() OVER (PARTITION BY r.sink, r.dedup_key ORDER BY r.ord) = 1 AS first
              FROM unnest(r_events, r_sinks, r_keys) WITH ORDINALITY AS r(event, sink, dedup_key, ord)) r
        LEFT JOIN unnest(c_sinks, c_keys, c_ids) AS c(sink, dedup_key, id)
            ON c.sink = r.sink AND c.dedup_key = r.dedup_key
        ORDER BY r.ord;
END
$fn$;

-- publish(): publish_batch() for one event, the call a producer makes
-- inside its transaction in any language:
--
--   SELECT * FROM outbox.publish('order.created', 'order-42', '{"id": 42}');
--   SELECT * FROM outbox.publish(type => 'incident.resolved', key => 'inc-7-resolved',
--       data => '{"id": 7}', thread_key => 'inc-7');
--
-- It answers one row per target: its sink, id, and whether this call
-- created it.
CREATE FUNCTION publish(
    type         text,
    key          text,
    data         jsonb,
    ordering_key text  DEFAULT NULL,
    thread_key   text  DEFAULT NULL,
    headers      jsonb DEFAULT NULL
) RETURNS TABLE (sink text, id bigint, created boolean)
LANGUAGE sql
SET search_path FROM CURRENT
AS $fn$
    SELECT p.sink, p.id, p.created
    FROM publish_batch(ARRAY[type], ARRAY[key], ARRAY[data], ARRAY[ordering_key], ARRAY[thread_key], headers) p
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

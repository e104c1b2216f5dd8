-- publish_batch(), second definition (the first is migration 003's).
-- Three changes, nothing else:
--
-- 1. It names the event it refuses in a field of the error of its own, not
--    only in its message: the error's COLUMN field holds the event's
--    ordinal in the batch (from 1), the one structured field RAISE offers
--    for a position. Clients (core.PublishBatch's BatchError) read it there
--    instead of parsing the message, whose wording stays as it was.
-- 2. It validates the keys it derives as it validates the ones an event
--    gives: a route's thread_key template may read any part of the event's
--    data, so the thread key it makes is held to the explicit thread_key's
--    limits (at most 255 bytes, no control character), and the dedup key
--    (type/key/route) and ordering key (sink/thread or sink/ordering_key)
--    it composes are checked too. A refusal is SQLSTATE 22023 naming the
--    event and the route, where an over-long key used to fail the
--    producer's transaction with 54000 (an index row too large) or store a
--    key no explicit one could be.
-- 3. Each published row remembers the routes version it was published
--    under (route_version, below), so that a relay renders it with that
--    version's target: its own compiled template only when its
--    configuration's digest is that version's, else the copy in
--    route_targets. Before, a relay rendered every row of a route it knew
--    with its own template, and a deploy that changed a template
--    dead-lettered the rows published before it (docs/events.md, rolling
--    deploys).
--
-- route_version is NULL for rows enqueued directly and for rows published
-- before this migration (those keep the old rule). It has no foreign key:
-- route versions are never deleted, and the check would cost every
-- publish an index probe. Adding a column without a default rewrites
-- nothing and holds the table's lock only for the catalog change.
ALTER TABLE messages ADD COLUMN route_version bigint;

CREATE OR REPLACE FUNCTION publish_batch(
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
    -- The dedup key and ordering key publish() composes are made of parts
    -- of at most max_key_bytes each (type, key, thread or ordering key)
    -- and of route and sink names; this bounds them well below the about
    -- 2,700 bytes a btree index entry may hold.
    max_derived_key_bytes CONSTANT int := 1024;
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
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = bad.ord::text,
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

    -- The keys derived for each target, held to the explicit keys' rules.
    SELECT t.event, t.route, t.problem INTO bad FROM (
        SELECT t.event, t.route, CASE
            WHEN octet_length(t.thread) > max_key_bytes THEN
                format('its thread_key template makes a thread key of %s bytes, over the limit of %s', octet_length(t.thread), max_key_bytes)
            WHEN t.thread ~ control_re THEN format('its thread_key template makes thread key %s, which holds a control character', to_json(t.thread))
            WHEN octet_length(t.dedup_key) > max_derived_key_bytes THEN
                format('the dedup key it makes is %s bytes, over the limit of %s', octet_length(t.dedup_key), max_derived_key_bytes)
            WHEN t.dedup_key ~ control_re THEN format('the dedup key it makes, %s, holds a control character', to_json(t.dedup_key))
            WHEN octet_length(t.ordering) > max_derived_key_bytes THEN
                format('the ordering key it makes is %s bytes, over the limit of %s', octet_length(t.ordering), max_derived_key_bytes)
            WHEN t.ordering ~ control_re THEN format('the ordering key it makes, %s, holds a control character', to_json(t.ordering))
        END AS problem
        FROM unnest(r_events, r_routes, r_threads, r_keys, r_orders) AS t(event, route, thread, dedup_key, ordering)
    ) t WHERE t.problem IS NOT NULL ORDER BY t.event LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', COLUMN = bad.event::text,
            MESSAGE = 'outbox: invalid event: ' || CASE WHEN n > 1 THEN format('event %s: ', bad.event) ELSE '' END
                || format('event %s/%s, route %s: %s', publish_batch.types[bad.event], publish_batch.keys[bad.event], bad.route, bad.problem);
    END IF;

    SELECT min(e.ord) AS ord, count(*) AS events, (array_agg(e.type ORDER BY e.ord))[1] AS type, array_agg(e.type) AS types INTO unmatched
    FROM unnest(publish_batch.types) WITH ORDINALITY AS e(type, ord)
    WHERE e.ord <> ALL (coalesce(r_events, '{}'));
    IF unmatched.events > 0 THEN
        IF policy = 'error' THEN
            RAISE EXCEPTION USING ERRCODE = 'no_data_found', COLUMN = unmatched.ord::text,
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
            INSERT INTO messages AS m (sink, dedup_key, payload, headers, ordering_key, route, thread_key, route_version)
            SELECT r.sink, r.dedup_key, r.payload, coalesce(publish_batch.headers, '{}'), r.ordering, r.route, r.thread, v
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

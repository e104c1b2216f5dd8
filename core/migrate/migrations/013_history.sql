-- Delivered history leaves the hot table (docs/design.md, "Delivered
-- history"). Claims read messages; until now a delivered row stayed there
-- as phase 'sent' until retention deleted it row by row, so at 1,000 msg/s
-- and 24 h of retention the table held 86M rows and deleted 1,000 a second.
--
-- From now on:
--
-- * message_keys holds every (sink, dedup_key) of the retention window,
--   open, dead or delivered, with its row's id. It decides duplicates: every
--   enqueue path inserts the key first (ON CONFLICT DO NOTHING) and writes
--   the row only for a key it inserted, with the id the key drew. A moved
--   row keeps its key, so a producer racing a delivery never sees the key
--   missing. PostgreSQL cannot enforce uniqueness across the time partitions
--   below; this table is the one narrow place that does.
-- * The successful finish moves the row, in the same token-guarded
--   statement, from messages into messages_history (DELETE ... RETURNING
--   into INSERT). Dead letters stay in messages, outside the open index.
-- * messages_history is partitioned by LIST on slot: a ring of partitions.
--   Rows go to the slot marked current in history_slots; the leading relay's
--   maintenance rotates the current slot every retention/4 and, once a
--   closed slot's newest row is older than the retention, deletes its keys
--   (narrow rows, in batches) and TRUNCATEs it: no payload row is ever
--   deleted one by one, and the space comes back at once, whatever snapshot
--   another session holds.
--
-- Online: this migration only creates tables and functions; it reads no
-- row of messages and holds its locks for catalog changes only. Rows
-- stored before it (and any row an older binary writes during a rolling
-- deploy) have no key: every enqueue path also refuses a key a row of
-- messages still holds (one probe of messages_sink_dedup_key_key, which
-- stays), and moving a row to history writes its key if it has none. The
-- sent rows left in messages are moved by maintenance in batches after the
-- migration (move_sent.sql), so the hot table empties of history without a
-- long lock.

CREATE TABLE message_keys (
    sink      text   NOT NULL,
    dedup_key text   NOT NULL,
    -- The row's id in messages or messages_history.
    id        bigint NOT NULL,
    PRIMARY KEY (sink, dedup_key)
);

-- The columns of messages a delivered row keeps, plus its slot. status is
-- always 'sent' and phase is not stored; lease columns are always NULL.
CREATE TABLE messages_history (
    slot          int         NOT NULL,
    id            bigint      NOT NULL,
    sink          text        NOT NULL,
    dedup_key     text        NOT NULL,
    payload       jsonb       NOT NULL,
    headers       jsonb       NOT NULL,
    ordering_key  text,
    attempts      int         NOT NULL,
    max_attempts  int,
    deferrals     int         NOT NULL,
    available_at  timestamptz NOT NULL,
    last_error    text,
    receipt       jsonb,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    sent_at       timestamptz NOT NULL,
    route         text,
    thread_key    text,
    route_version bigint
) PARTITION BY LIST (slot);
-- Lookups by id (get, the console) and the sent-in-the-last-hour count.
-- Rows arrive in id and sent_at order, so both inserts land at the right
-- edge of their index.
CREATE INDEX messages_history_id_idx ON messages_history (id);
CREATE INDEX messages_history_sent_idx ON messages_history (sent_at);

-- The ring. state: current (one slot: where delivered rows go), closed
-- (since closed_at, waiting for the retention to pass), expiring (its keys
-- are being deleted), free (truncated, ready to become current again).
CREATE TABLE history_slots (
    slot      int PRIMARY KEY,
    state     text        NOT NULL CHECK (state IN ('current', 'closed', 'expiring', 'free')),
    opened_at timestamptz,
    closed_at timestamptz
);
CREATE UNIQUE INDEX history_slots_current_idx ON history_slots ((true)) WHERE state = 'current';

-- history_add_slot() attaches partition slot n, created apart and then
-- attached: CREATE TABLE ... PARTITION OF would lock the whole history
-- table exclusively; ATTACH takes a lock that lets reads and inserts go on.
CREATE FUNCTION history_add_slot(n int, state text) RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    EXECUTE format('CREATE TABLE %I (LIKE messages_history)', 'messages_history_' || n);
    EXECUTE format('ALTER TABLE messages_history ATTACH PARTITION %I FOR VALUES IN (%s)', 'messages_history_' || n, n);
    INSERT INTO history_slots (slot, state, opened_at) VALUES (n, state, CASE WHEN state = 'current' THEN now() END);
END
$fn$;

SELECT history_add_slot(0, 'current');
SELECT history_add_slot(1, 'free');

-- history_rotate(): when the current slot has been current for width,
-- closes it and makes a free slot current, attaching a new one when none
-- is free (the ring grows to about retention/width + 2 slots and stays
-- there). Returns whether it rotated. A lock it cannot take within
-- lock_wait (a session holding the history table) puts the rotation off
-- to the next round: rows keep going to the current slot meanwhile.
CREATE FUNCTION history_rotate(width interval, lock_wait interval) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    cur  int;
    next int;
BEGIN
    -- One rotation at a time (a lead handed over mid-round).
    SELECT s.slot INTO cur FROM history_slots s
    WHERE s.state = 'current' AND s.opened_at <= now() - width FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT s.slot INTO next FROM history_slots s WHERE s.state = 'free' ORDER BY s.slot LIMIT 1 FOR UPDATE;
    IF NOT FOUND THEN
        BEGIN
            PERFORM set_config('lock_timeout', (extract(epoch FROM lock_wait) * 1000)::bigint::text || 'ms', true);
            SELECT max(s.slot) + 1 INTO next FROM history_slots s;
            PERFORM history_add_slot(next, 'free');
        EXCEPTION WHEN lock_not_available THEN
            RETURN false;
        END;
    END IF;
    UPDATE history_slots SET state = 'closed', closed_at = now() WHERE slot = cur;
    UPDATE history_slots SET state = 'current', opened_at = now(), closed_at = NULL WHERE slot = next;
    RETURN true;
END
$fn$;

-- history_expiring(): the slot whose rows have all outlived retention
-- (closed longer ago than it), marked expiring; NULL when there is none.
-- Maintenance then deletes its keys in batches (expire_history_keys.sql)
-- and truncates it (history_truncate).
CREATE FUNCTION history_expiring(retention interval) RETURNS int
LANGUAGE sql
SET search_path FROM CURRENT
AS $fn$
    UPDATE history_slots SET state = 'expiring'
    WHERE slot = (SELECT s.slot FROM history_slots s
                  WHERE s.state = 'expiring' OR (s.state = 'closed' AND s.closed_at < now() - retention)
                  ORDER BY s.state = 'expiring' DESC, s.closed_at LIMIT 1)
    RETURNING slot
$fn$;

-- history_truncate(): empties expiring slot n and frees it. TRUNCATE takes
-- the partition's exclusive lock (and no lock on the other partitions);
-- when a session holds the partition for longer than lock_wait, it returns
-- false and maintenance tries again next round.
CREATE FUNCTION history_truncate(n int, lock_wait interval) RETURNS boolean
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    PERFORM set_config('lock_timeout', (extract(epoch FROM lock_wait) * 1000)::bigint::text || 'ms', true);
    EXECUTE format('TRUNCATE %I', 'messages_history_' || n);
    UPDATE history_slots SET state = 'free', opened_at = NULL, closed_at = NULL WHERE slot = n AND state = 'expiring';
    RETURN true;
EXCEPTION WHEN lock_not_available THEN
    RETURN false;
END
$fn$;

-- message_id(): the id of the row stored under (sink, dedup_key): its key,
-- or, for a row stored before this migration that has none yet, the row in
-- messages. NULL when there is none.
CREATE FUNCTION message_id(sink text, dedup_key text) RETURNS bigint
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $fn$
    SELECT coalesce(
        (SELECT k.id FROM message_keys k WHERE k.sink = message_id.sink AND k.dedup_key = message_id.dedup_key),
        (SELECT m.id FROM messages m WHERE m.sink = message_id.sink AND m.dedup_key = message_id.dedup_key))
$fn$;

-- enqueue(), third definition (002, 011): the key first, then the row.
-- Only the insert loop differs from migration 011's.
CREATE OR REPLACE FUNCTION enqueue(
    sink         text,
    dedup_key    text,
    payload      jsonb,
    ordering_key text        DEFAULT NULL,
    headers      jsonb       DEFAULT NULL,
    available_at timestamptz DEFAULT NULL,
    max_attempts int         DEFAULT NULL,
    OUT id       bigint,
    OUT created  boolean
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    -- core.DefaultMaxPayloadBytes and core.MaxDedupKeyBytes.
    max_payload_bytes CONSTANT int := 262144;
    max_key_bytes     CONSTANT int := 255;
    -- Go's validation caps a message's max_attempts here.
    max_attempts_cap  CONSTANT int := 1073741824;
    -- What unicode.IsPrint rejects among assigned code points (Unicode 15):
    -- controls, format characters, private use, every space but U+0020,
    -- and U+FFFD, which Go reads as a byte that was not valid UTF-8.
    non_printable CONSTANT text := '[\u0001-\u001f\u007f-\u00a0\u00ad\u0600-\u0605\u061c\u06dd\u070f'
        '\u0890-\u0891\u08e2\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000'
        '\ue000-\uf8ff\ufeff\ufff9-\ufffb\ufffd\U000110bd\U000110cd\U00013430-\U0001343f'
        '\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f'
        '\U000f0000-\U000ffffd\U00100000-\U0010fffd]';
    prefix CONSTANT text := 'outbox: invalid message: ';
    payload_bytes int;
    key record;
BEGIN
    FOR key IN SELECT * FROM (VALUES ('sink', enqueue.sink), ('dedup key', enqueue.dedup_key), ('ordering key', enqueue.ordering_key)) AS k(what, value)
    LOOP
        CONTINUE WHEN key.what = 'ordering key' AND coalesce(key.value, '') = '';
        IF coalesce(key.value, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || key.what || ' is empty';
        END IF;
        IF octet_length(key.value) > max_key_bytes THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s is %s bytes, over the limit of %s', prefix, key.what, octet_length(key.value), max_key_bytes);
        END IF;
        IF key.value ~ non_printable THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s %s holds a character that is not printable', prefix, key.what, to_json(key.value));
        END IF;
    END LOOP;
    IF enqueue.max_attempts < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%smax attempts must not be negative, got %s', prefix, enqueue.max_attempts);
    END IF;
    IF enqueue.payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || 'payload is empty';
    END IF;
    payload_bytes := octet_length(enqueue.payload::text);
    IF payload_bytes > max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%spayload is %s bytes, over the limit of %s', prefix, payload_bytes, max_payload_bytes);
    END IF;
    IF enqueue.headers IS NOT NULL AND (jsonb_typeof(enqueue.headers) <> 'object' OR EXISTS (
        SELECT FROM jsonb_each(enqueue.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = prefix || 'headers must be a JSON object of strings';
    END IF;

    -- Take the key, or find the row that holds it. The lookup is a
    -- statement of its own so that, under READ COMMITTED, it sees a key a
    -- concurrent transaction committed after the insert's snapshot; if
    -- that key is deleted in between (retention), the loop inserts again.
    LOOP
        INSERT INTO message_keys AS k (sink, dedup_key, id)
        SELECT enqueue.sink, enqueue.dedup_key, nextval('messages_id_seq')
        WHERE NOT EXISTS (SELECT FROM messages m WHERE m.sink = enqueue.sink AND m.dedup_key = enqueue.dedup_key)
        ON CONFLICT (sink, dedup_key) DO NOTHING
        RETURNING k.id INTO enqueue.id;
        IF FOUND THEN
            INSERT INTO messages (id, sink, dedup_key, payload, headers, ordering_key, max_attempts, available_at)
            OVERRIDING SYSTEM VALUE
            VALUES (enqueue.id, enqueue.sink, enqueue.dedup_key, enqueue.payload, coalesce(enqueue.headers, '{}'),
                    nullif(enqueue.ordering_key, ''), CASE WHEN enqueue.max_attempts > 0 THEN least(enqueue.max_attempts, max_attempts_cap) END,
                    coalesce(enqueue.available_at, now()));
            created := true;
            -- wake() (migration 006) notifies a relay waiting for this
            -- sink's rows, if any; it hears it on commit.
            PERFORM wake(enqueue.sink);
            RETURN;
        END IF;
        enqueue.id := message_id(enqueue.sink, enqueue.dedup_key);
        IF enqueue.id IS NOT NULL THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
END
$fn$;

-- publish_batch(), third definition (003, 007): the keys first, then the
-- rows, as enqueue() above. Only the insert loop and the final lookup of
-- existing rows differ from migration 007's. Events routed to several
-- sinks (routing's fan-out) are one row per target here, so each target's
-- key is taken on its own.
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

    -- Take the keys, or find the rows that hold them: each key once (its
    -- first target), then a row for each key taken, with the id the key
    -- drew (drawn in target order, so ids follow it). The lookup is a
    -- statement of its own so that, under READ COMMITTED, it sees keys a
    -- concurrent transaction committed after the insert's snapshot; if one
    -- of them is deleted in between (retention), the loop inserts again.
    LOOP
        WITH todo AS (
            SELECT DISTINCT ON (r.sink, r.dedup_key) r.*
            FROM unnest(r_sinks, r_keys, r_payloads, r_orders, r_routes, r_threads) WITH ORDINALITY
                AS r(sink, dedup_key, payload, ordering, route, thread, ord)
            ORDER BY r.sink, r.dedup_key, r.ord
        ), taken AS (
            INSERT INTO message_keys AS k (sink, dedup_key, id)
            SELECT t.sink, t.dedup_key, nextval('messages_id_seq') FROM todo t
            WHERE NOT EXISTS (SELECT FROM messages m WHERE m.sink = t.sink AND m.dedup_key = t.dedup_key)
            ORDER BY t.ord
            ON CONFLICT (sink, dedup_key) DO NOTHING
            RETURNING k.sink, k.dedup_key, k.id
        ), ins AS (
            INSERT INTO messages AS m (id, sink, dedup_key, payload, headers, ordering_key, route, thread_key, route_version)
            OVERRIDING SYSTEM VALUE
            SELECT k.id, t.sink, t.dedup_key, t.payload, coalesce(publish_batch.headers, '{}'), t.ordering, t.route, t.thread, v
            FROM taken k JOIN todo t ON t.sink = k.sink AND t.dedup_key = k.dedup_key
            ORDER BY k.id
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
            WHERE message_id(r.sink, r.dedup_key) IS NULL);
    END LOOP;
    -- A key repeated within the batch was created by its first event only.
    RETURN QUERY
        SELECT r.event, r.sink,
               coalesce(c.id, message_id(r.sink, r.dedup_key)),
               c.id IS NOT NULL AND r.first
        FROM (SELECT r.*, row_number() OVER (PARTITION BY r.sink, r.dedup_key ORDER BY r.ord) = 1 AS first
              FROM unnest(r_events, r_sinks, r_keys) WITH ORDINALITY AS r(event, sink, dedup_key, ord)) r
        LEFT JOIN unnest(c_sinks, c_keys, c_ids) AS c(sink, dedup_key, id)
            ON c.sink = r.sink AND c.dedup_key = r.dedup_key
        ORDER BY r.ord;
END
$fn$;

-- Every row of the retention window in one relation, as messages held them
-- before this migration: ad-hoc SQL (an operator's psql, a test) that
-- looked for a delivered row in messages finds it here. Reads only; the
-- relay and the operator statements read the tables themselves.
CREATE VIEW messages_all AS
    SELECT id, sink, dedup_key, payload, headers, ordering_key, status, attempts, max_attempts, deferrals,
           available_at, lease_token, lease_expires_at, last_error, receipt, created_at, updated_at, sent_at,
           phase, route, thread_key, route_version
    FROM messages
    UNION ALL
    SELECT id, sink, dedup_key, payload, headers, ordering_key, 'sent', attempts, max_attempts, deferrals,
           available_at, NULL, NULL, last_error, receipt, created_at, updated_at, sent_at,
           'sent', route, thread_key, route_version
    FROM messages_history;

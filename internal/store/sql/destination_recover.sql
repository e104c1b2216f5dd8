-- name: destination_recover :one
-- params: tenant text, id text, since timestamptz, until timestamptz null, include_delivered boolean, dry_run boolean, digest text
-- returns: found bigint, dead bigint, delivered bigint, digest text, changed boolean, recovered bigint
-- Recovery of a destination (docs/destinations.md, "Recovery"): the
-- events of destination @id of tenant @tenant created in [@since,
-- @until) (@until NULL: up to now) go back to pending, due now, their
-- attempts and deferrals reset: its dead rows, and with
-- @include_delivered its delivered rows too, as long as the history
-- keeps them (messages_history, migration 013: the retention). A
-- delivered row moves back from history into messages under its id, sink
-- and dedup key, so its key (message_keys) still names it and the
-- receiver sees the webhook-id it saw the first time; its destination's
-- revision is stamped anew (migration 025).
--
-- With @dry_run nothing moves; otherwise the rows move only when @digest
-- is the counted one (the dry run's, as redrive.sql's and
-- destination_delete_count.sql's): a row that died, was delivered or
-- left since the count makes changed true and moves nothing. found says
-- whether the tenant has the destination (1) or not (0). Walks the
-- destination's index on each side (migrations 016 and 020).
WITH d AS (
    SELECT id FROM {schema}.destinations WHERE tenant = @tenant AND id = @id
), dead AS (
    SELECT m.id, m.updated_at FROM {schema}.messages m
    WHERE (m.headers->>'outboxd-destination') = (SELECT id FROM d) AND m.headers ? 'outboxd-destination'
      AND m.phase = 'dead'
      AND m.created_at >= @since AND (@until::timestamptz IS NULL OR m.created_at < @until)
), delivered AS (
    SELECT h.id, h.updated_at FROM {schema}.messages_history h
    WHERE @include_delivered
      AND (h.headers->>'outboxd-destination') = (SELECT id FROM d) AND h.headers ? 'outboxd-destination'
      AND h.created_at >= @since AND (@until::timestamptz IS NULL OR h.created_at < @until)
), counted AS (
    -- The digest as redrive.sql's: each row by its id and its last change.
    SELECT (SELECT count(*) FROM d) AS found,
           (SELECT count(*) FROM dead) AS dead,
           (SELECT count(*) FROM delivered) AS delivered,
           md5(COALESCE((SELECT string_agg(t.id::text || '@' || (extract(epoch FROM t.updated_at) * 1000000)::bigint::text, ',' ORDER BY t.id)
                         FROM (SELECT * FROM dead UNION ALL SELECT * FROM delivered) t), '')) AS digest
), confirmed AS (
    SELECT NOT @dry_run AND c.digest = @digest AS ok FROM counted c
), redriven AS (
    UPDATE {schema}.messages m
    SET status = 'pending', attempts = 0, deferrals = 0, available_at = now(), updated_at = now(),
        lease_token = NULL, lease_expires_at = NULL
    WHERE (SELECT ok FROM confirmed) AND m.phase = 'dead'
      AND m.id = ANY(ARRAY(SELECT id FROM dead))
    RETURNING m.id, m.sink
), moved AS (
    DELETE FROM {schema}.messages_history h
    WHERE (SELECT ok FROM confirmed) AND h.id = ANY(ARRAY(SELECT id FROM delivered))
    RETURNING h.id, h.sink, h.dedup_key, h.payload, h.headers, h.ordering_key, h.max_attempts, h.created_at,
              h.route, h.thread_key, h.route_version
), restored AS (
    INSERT INTO {schema}.messages (id, sink, dedup_key, payload, headers, ordering_key, status, attempts, max_attempts,
        available_at, created_at, updated_at, route, thread_key, route_version)
    OVERRIDING SYSTEM VALUE
    SELECT v.id, v.sink, v.dedup_key, v.payload, v.headers, v.ordering_key, 'pending', 0, v.max_attempts,
           now(), v.created_at, now(), v.route, v.thread_key, v.route_version
    FROM moved v
    RETURNING id, sink
), wake AS (
    SELECT {schema}.wake(s.sink) FROM (SELECT sink FROM redriven UNION SELECT sink FROM restored) s
)
SELECT c.found, c.dead, c.delivered, c.digest, NOT @dry_run AND NOT (SELECT ok FROM confirmed),
       (SELECT count(*) FROM redriven) + (SELECT count(*) FROM restored)
-- CROSS JOIN: the wake-ups run only when something reads them (redrive.sql).
FROM counted c CROSS JOIN (SELECT count(*) FROM wake) w

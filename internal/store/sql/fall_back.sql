-- name: fall_back :many
-- params: sink text, route text, to_sink text, reason text, after interval, id bigint null, token uuid null, limit bigint as int
-- returns: id bigint, fallback_id bigint
-- Hands rows of route @route's target @sink over to its fallback sink
-- @to_sink (migration 028), up to @limit of them, in one statement: each
-- original row leaves messages for messages_history, marked with where it
-- went and @reason, and a row of @to_sink takes its place with the same
-- payload, headers, ordering and thread keys, the dedup key
-- "<original dedup key>/fallback" (its receiver sees a delivery id of its
-- own, derived from the original's) and no routes version (the stage
-- renders it with the relay's configured fallback template). The new row
-- takes its key in message_keys as every enqueue does and wakes a relay
-- loop of @to_sink.
--
-- Which rows. With @id and @token: that one row, while the lease @token
-- holds (the finish of an attempt that would have dead-lettered it,
-- fallback_after: dead): a zombie's call changes nothing. Without: the
-- rows of the target that no relay holds (no lease, or an expired one)
-- while @sink's breaker has been open for at least @after and a probe has
-- failed since the row was created (created_at before last_failure_at):
-- a row that arrived after the last failed probe waits for the next one,
-- so the probe always has a row to try and a healed receiver closes its
-- breaker before the sweep can take the new rows. Rows are locked FOR
-- UPDATE SKIP LOCKED, as a claim locks them, so a claim and this
-- statement never both take a row.
WITH open_breaker AS (
    SELECT b.last_failure_at FROM {schema}.destination_breakers b
    WHERE b.sink = @sink AND b.dest_key = '' AND b.opened_at <= now() - @after::interval
), picked_one AS (
    SELECT m.id, m.dedup_key FROM {schema}.messages m
    WHERE m.id = @id::bigint AND m.lease_token = @token::uuid AND m.sink = @sink AND m.route = @route
    FOR UPDATE OF m
), picked_swept AS (
    SELECT m.id, m.dedup_key FROM {schema}.messages m, open_breaker b
    WHERE @id::bigint IS NULL AND m.sink = @sink AND m.route = @route AND m.phase = 'open'
      AND (m.lease_token IS NULL OR m.lease_expires_at < now()) AND m.created_at < b.last_failure_at
    ORDER BY m.id
    LIMIT @limit
    FOR UPDATE OF m SKIP LOCKED
), keys AS (
    -- The new rows' keys first: a row whose fallback key is taken already
    -- (a fallback of the same message delivered before it was redriven)
    -- stays where it is, so no row is ever handed over to nothing.
    INSERT INTO {schema}.message_keys (sink, dedup_key, id)
    SELECT @to_sink::text, p.dedup_key || '/fallback', nextval('{schema}.messages_id_seq')
    FROM (SELECT * FROM picked_one UNION ALL SELECT * FROM picked_swept ORDER BY id) p
    ON CONFLICT (sink, dedup_key) DO NOTHING
    RETURNING id, dedup_key
), gone AS (
    -- The rows are locked by this statement: nothing changed them since.
    DELETE FROM {schema}.messages m
    USING keys k
    WHERE m.sink = @sink AND m.dedup_key || '/fallback' = k.dedup_key
      AND m.id IN (SELECT id FROM picked_one UNION ALL SELECT id FROM picked_swept)
    RETURNING m.*, k.id AS fallback_id
), ins AS (
    INSERT INTO {schema}.messages (id, sink, dedup_key, payload, headers, ordering_key, route, thread_key, fallback)
    OVERRIDING SYSTEM VALUE
    SELECT g.fallback_id, @to_sink, g.dedup_key || '/fallback', g.payload, g.headers, g.ordering_key, g.route, g.thread_key,
           jsonb_build_object('of', g.id, 'from', g.sink, 'reason', @reason::text)
    FROM gone g
    ORDER BY g.id
    RETURNING id
), history AS (
    INSERT INTO {schema}.messages_history (slot, id, sink, dedup_key, payload, headers, ordering_key, attempts, max_attempts,
        deferrals, available_at, last_error, receipt, created_at, updated_at, sent_at, route, thread_key, route_version,
        digest_id, fallback)
    SELECT (SELECT s.slot FROM {schema}.history_slots s WHERE s.state = 'current'), g.id, g.sink, g.dedup_key, g.payload,
           g.headers, g.ordering_key, g.attempts, g.max_attempts, g.deferrals, g.available_at, g.last_error, g.receipt,
           g.created_at, now(), now(), g.route, g.thread_key, g.route_version, g.digest_id,
           jsonb_build_object('to', @to_sink::text, 'id', g.fallback_id, 'reason', @reason::text)
    FROM gone g
), wake AS (
    SELECT {schema}.wake(@to_sink) FROM ins LIMIT 1
)
SELECT g.id, g.fallback_id FROM gone g CROSS JOIN (SELECT count(*) FROM wake) w

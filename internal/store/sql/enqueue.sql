-- name: enqueue :one
-- params: sink text, dedup_key text, payload jsonb, headers jsonb, ordering_key text null, max_attempts integer null, available_at timestamptz null
-- returns: id bigint
-- Takes the message's key and inserts the message and, in the same statement, wakes a relay loop
-- waiting for its sink's rows (wake(), migration 006). The notification is
-- transactional: delivered on commit, and PostgreSQL folds identical ones
-- of one transaction into one, so a bulk enqueue does not cause a storm.
-- @sink sink, @dedup_key dedup_key, @payload payload, @headers headers, @ordering_key ordering_key,
-- @max_attempts max_attempts, @available_at available_at (NULL: now).
-- Returns the new id, or no row for a duplicate.
WITH k AS (
    -- The key decides (migration 013): taken here, or held by a row of
    -- the retention window (in messages, in history, or a row stored
    -- before 013 that has no key yet).
    INSERT INTO {schema}.message_keys (sink, dedup_key, id)
    SELECT @sink::text, @dedup_key::text, nextval('{schema}.messages_id_seq')
    WHERE NOT EXISTS (SELECT FROM {schema}.messages m WHERE m.sink = @sink AND m.dedup_key = @dedup_key)
    ON CONFLICT (sink, dedup_key) DO NOTHING
    RETURNING id
), ins AS (
    INSERT INTO {schema}.messages (id, sink, dedup_key, payload, headers, ordering_key, max_attempts, available_at)
    OVERRIDING SYSTEM VALUE
    SELECT k.id, @sink, @dedup_key, @payload::jsonb, @headers::jsonb, @ordering_key::text, @max_attempts::integer,
           COALESCE(@available_at::timestamptz, now())
    FROM k
    RETURNING id
), wake AS (
    SELECT {schema}.wake(@sink) FROM ins LIMIT 1
)
-- CROSS JOIN with a count, as the batch enqueue does: a join the planner
-- could drop would drop the wake-up with it.
SELECT ins.id FROM ins CROSS JOIN (SELECT count(*) FROM wake) w

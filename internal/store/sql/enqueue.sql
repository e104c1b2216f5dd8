-- Inserts one message and, in the same statement, wakes a relay loop
-- waiting for its sink's rows (wake(), migration 006). The notification is
-- transactional: delivered on commit, and PostgreSQL folds identical ones
-- of one transaction into one, so a bulk enqueue does not cause a storm.
-- $1 sink, $2 dedup_key, $3 payload, $4 headers, $5 ordering_key,
-- $6 max_attempts, $7 available_at (NULL: now).
-- Returns the new id, or no row for a duplicate.
WITH ins AS (
    INSERT INTO {schema}.messages (sink, dedup_key, payload, headers, ordering_key, max_attempts, available_at)
    VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, now()))
    ON CONFLICT (sink, dedup_key) DO NOTHING
    RETURNING id
), wake AS (
    SELECT {schema}.wake($1) FROM ins LIMIT 1
)
-- CROSS JOIN with a count, as the batch enqueue does: a join the planner
-- could drop would drop the wake-up with it.
SELECT ins.id FROM ins CROSS JOIN (SELECT count(*) FROM wake) w

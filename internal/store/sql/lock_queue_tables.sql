-- name: lock_queue_tables :exec
-- Takes the queue's tables, where they exist, in the order producers take
-- them (the dedup keys, then the rows: enqueue(), migration 013) and for
-- the rest of the migration's transaction: the migrations' DDL on them
-- (ALTER TABLE, CREATE TRIGGER, index rebuilds) would otherwise take its
-- locks one statement at a time, while a producer holding a key's row lock
-- waits for messages, a deadlock PostgreSQL breaks by failing the
-- migration. Producers wait for the migration instead, as ALTER TABLE
-- makes them wait anyway.
DO $$
BEGIN
    IF to_regclass('{schema}.message_keys') IS NOT NULL THEN
        LOCK TABLE {schema}.message_keys, {schema}.messages IN ACCESS EXCLUSIVE MODE;
    ELSIF to_regclass('{schema}.messages') IS NOT NULL THEN
        LOCK TABLE {schema}.messages IN ACCESS EXCLUSIVE MODE;
    END IF;
END
$$

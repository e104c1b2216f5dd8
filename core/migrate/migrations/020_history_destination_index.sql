-- A destination's delivered rows move to messages_history (migration 013)
-- like every other delivered row; its recent deliveries
-- (destination_deliveries.sql) are read from both tables, each through an
-- index on the destination's header, as migration 016 gave the hot table.
-- On the partitioned table the index is created on every slot, and a slot
-- attached later gets its own.
CREATE INDEX messages_history_destination_idx ON messages_history ((headers->>'outboxd-destination'), id)
    WHERE headers ? 'outboxd-destination';

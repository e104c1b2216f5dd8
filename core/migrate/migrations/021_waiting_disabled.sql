-- The rows waiting on a disabled destination (docs/destinations.md):
-- parked due at infinity by destination_set_enabled.sql, the fan-out and
-- enqueue_destination(), they are pending but no relay claims them until
-- the destination is enabled again. The stats snapshot counts them per
-- sink beside the pending ones (take_stats_snapshot.sql), so that
-- `outboxd stats`, GET /v1/stats and the console show what waits and why,
-- and no row is held without its operator seeing it.
ALTER TABLE sink_stats ADD COLUMN waiting_disabled bigint NOT NULL DEFAULT 0;

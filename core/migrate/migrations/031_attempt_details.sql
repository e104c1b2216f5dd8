-- Attempt details (docs/destinations.md, "Attempt details"): when an
-- attempt started, how long it took, the receiver's HTTP status, the first
-- 4 KiB of its answer (valid UTF-8, secrets scrubbed) and the address the
-- request went to, as one JSON object:
--   {"started_at": "...", "duration_ms": 12.5, "status": 503,
--    "response": "...", "remote_addr": "203.0.113.7:443"}
-- status, response and remote_addr are absent when the sink reported no
-- answer (a broker, a refused connection).
--
-- The relay writes them in the terminal write it already makes
-- (finish.sql), no statement of their own: a failed attempt's on its
-- failed_attempts row, the last attempt's on the row (messages) and, once
-- delivered, on its history row. Only sinks that report an answer
-- (sink.RecordAnswer: webhook, destinations, slack) write them on a
-- delivered row, so a broker's deliveries cost nothing more.
--
-- Online: nullable columns without a default are a change of the catalog
-- alone; no row is rewritten. New history partitions take the column from
-- messages_history (history_add_slot's LIKE).
ALTER TABLE failed_attempts ADD COLUMN details jsonb;
ALTER TABLE messages ADD COLUMN last_attempt jsonb;
ALTER TABLE messages_history ADD COLUMN last_attempt jsonb;

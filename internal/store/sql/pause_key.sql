-- name: pause_key :exec
-- params: sink text, key text, pause
-- Holds rate key $2 of sink $1 (a per_key sink, migration 003's
-- sink_key_limits) for $3 after its Retry-After: the key's GCRA clock moves
-- past the pause, so every relay's next reservation for that key waits for
-- it, while the sink's other keys keep their permits. Relays learn of it at
-- their next reservation; nothing is notified.
INSERT INTO {schema}.sink_key_limits AS l (sink, key, tat) VALUES ($1, $2, now() + $3::interval)
ON CONFLICT (sink, key) DO UPDATE SET tat = GREATEST(l.tat, EXCLUDED.tat)

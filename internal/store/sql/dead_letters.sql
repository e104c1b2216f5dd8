-- name: dead_letters :many
-- mode: cache_describe
-- params: sink text, limit bigint as int, after bigint, error_contains text
-- returns: id bigint, sink text, dedup_key text, payload jsonb, created_at timestamptz, receipt jsonb null
-- returns: attempts integer as int, last_error text, updated_at timestamptz, errors json
-- Up to $2 dead rows, oldest first, with ids above $3 (the cursor; 0
-- starts at the oldest): of sink $1 unless it is '', whose last error
-- contains $4 (ignoring case) unless it is ''. Each comes with its payload,
-- creation time, receipt and recorded failed attempts as a JSON array.
-- Planned with its values (core's oneShot), so a sink walks the dead index
-- (sink, id) WHERE phase = 'dead' from the cursor.
SELECT m.id, m.sink, m.dedup_key, m.payload, m.created_at, m.receipt, m.attempts,
       COALESCE(m.last_error, ''), m.updated_at,
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error) ORDER BY a.failed_at, a.attempt)
                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]')
FROM {schema}.messages m
WHERE m.phase = 'dead' AND ($1 = '' OR m.sink = $1) AND m.id > $3
  AND ($4 = '' OR strpos(lower(m.last_error), lower($4)) > 0)
ORDER BY m.id
LIMIT $2

-- Up to $2 dead rows (of sink $1, or of every sink when $1 is ''), oldest
-- first, each with its recorded failed attempts as a JSON array.
SELECT m.id, m.sink, m.dedup_key, m.attempts, COALESCE(m.last_error, ''), m.updated_at,
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error) ORDER BY a.attempt)
                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]')
FROM {schema}.messages m
WHERE m.phase = 'dead' AND ($1 = '' OR m.sink = $1)
ORDER BY m.id
LIMIT $2

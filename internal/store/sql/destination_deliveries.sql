-- name: destination_deliveries :many
-- capacity: limit
-- params: destination text, before bigint null, limit bigint as int
-- returns: id bigint, sink text, dedup_key text, status text, attempts integer as int, created_at timestamptz
-- returns: updated_at timestamptz, sent_at timestamptz null, last_error text, failed_attempts json as json.RawMessage
-- The rows of destination $1 newest first, at most $3 with ids below $2
-- (NULL: from the newest), each with every recorded failed attempt,
-- walking messages_destination_all_idx backwards.
SELECT m.id, m.sink, m.dedup_key, m.status, m.attempts, m.created_at, m.updated_at, m.sent_at, COALESCE(m.last_error, ''),
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error) ORDER BY a.attempt, a.failed_at)
                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]')
FROM {schema}.messages m
WHERE (m.headers->>'outboxd-destination') = $1 AND m.headers ? 'outboxd-destination'
  AND ($2::bigint IS NULL OR m.id < $2)
ORDER BY m.id DESC
LIMIT $3

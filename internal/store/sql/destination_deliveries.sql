-- name: destination_deliveries :many
-- capacity: limit
-- params: destination text, before bigint null, limit bigint as int
-- returns: id bigint, sink text, dedup_key text, status text, attempts integer as int, created_at timestamptz
-- returns: updated_at timestamptz, sent_at timestamptz null, last_error text, failed_attempts json as json.RawMessage
-- returns: last_attempt jsonb null as json.RawMessage
-- The rows of destination $1 newest first, at most $3 with ids below $2
-- (NULL: from the newest), each with every recorded failed attempt: the
-- waiting and dead ones in messages, the delivered ones in
-- messages_history (migration 013), each side walking its destination
-- index (migrations 016 and 020) backwards. Each attempt carries its
-- details (migration 031), and last_attempt is the last attempt's.
WITH rows AS (
    (SELECT m.id, m.sink, m.dedup_key, m.status, m.attempts, m.created_at, m.updated_at, m.sent_at, m.last_error, m.last_attempt
     FROM {schema}.messages m
     WHERE (m.headers->>'outboxd-destination') = $1 AND m.headers ? 'outboxd-destination'
       AND ($2::bigint IS NULL OR m.id < $2)
     ORDER BY m.id DESC
     LIMIT $3)
    UNION ALL
    (SELECT h.id, h.sink, h.dedup_key, 'sent', h.attempts, h.created_at, h.updated_at, h.sent_at, h.last_error, h.last_attempt
     FROM {schema}.messages_history h
     WHERE (h.headers->>'outboxd-destination') = $1 AND h.headers ? 'outboxd-destination'
       AND ($2::bigint IS NULL OR h.id < $2)
     ORDER BY h.id DESC
     LIMIT $3)
)
SELECT r.id, r.sink, r.dedup_key, r.status, r.attempts, r.created_at, r.updated_at, r.sent_at, COALESCE(r.last_error, ''),
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error, 'details', a.details) ORDER BY a.failed_at, a.attempt)
                 FROM {schema}.failed_attempts a WHERE a.message_id = r.id), '[]'),
       r.last_attempt
FROM rows r
ORDER BY r.id DESC
LIMIT $3

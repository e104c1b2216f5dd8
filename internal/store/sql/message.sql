-- name: message :one
-- params: id null, sink text, dedup_key text
-- returns: id bigint, sink text, dedup_key text, payload jsonb, headers jsonb as map[string]string, ordering_key text, status text
-- returns: attempts integer as int, max_attempts integer null as int, available_at timestamptz, created_at timestamptz
-- returns: updated_at timestamptz, sent_at timestamptz null, lease_expires_at timestamptz null, last_error text
-- returns: receipt jsonb null, failed_attempts json
-- One message as an operator sees it, with every recorded failed attempt
-- (in the order they failed, across redrives): the row with id $1, or, when $1 is NULL, the row stored
-- under (sink $2, dedup key $3). Either way one probe of a unique index.
SELECT m.id, m.sink, m.dedup_key, m.payload, m.headers, COALESCE(m.ordering_key, ''), m.status,
       m.attempts, m.max_attempts, m.available_at, m.created_at, m.updated_at, m.sent_at,
       m.lease_expires_at, COALESCE(m.last_error, ''), m.receipt,
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error) ORDER BY a.failed_at, a.attempt)
                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]')
FROM {schema}.messages m
WHERE m.id = COALESCE($1::bigint, (SELECT id FROM {schema}.messages WHERE sink = $2 AND dedup_key = $3))

-- name: message :one
-- params: id null, sink text, dedup_key text
-- returns: id bigint, sink text, dedup_key text, payload jsonb, headers jsonb as map[string]string, ordering_key text, status text
-- returns: attempts integer as int, max_attempts integer null as int, available_at timestamptz, created_at timestamptz
-- returns: updated_at timestamptz, sent_at timestamptz null, lease_expires_at timestamptz null, last_error text
-- returns: receipt jsonb null, failed_attempts json, fallback jsonb null, last_attempt jsonb null
-- One message as an operator sees it, with every recorded failed attempt
-- (in the order they failed, across redrives): the row with id $1, or, when $1 is NULL, the row stored
-- under (sink $2, dedup key $3) (its key, migration 013). It is in
-- messages (open or dead) or, delivered, in messages_history: one probe
-- of the primary key, or of each history partition's id index. fallback
-- says which row stood in for which and why (migration 028). Each failed
-- attempt has its details, and last_attempt is the last attempt's
-- (migration 031; NULL when none was recorded).
WITH target AS (
    SELECT COALESCE($1::bigint, {schema}.message_id($2, $3)) AS id
), found AS (
    SELECT m.id, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key, m.status, m.attempts, m.max_attempts,
           m.available_at, m.created_at, m.updated_at, m.sent_at, m.lease_expires_at, m.last_error, m.receipt, m.fallback, m.last_attempt
    FROM {schema}.messages m WHERE m.id = (SELECT id FROM target)
    UNION ALL
    SELECT h.id, h.sink, h.dedup_key, h.payload, h.headers, h.ordering_key, 'sent', h.attempts, h.max_attempts,
           h.available_at, h.created_at, h.updated_at, h.sent_at, NULL, h.last_error, h.receipt, h.fallback, h.last_attempt
    FROM {schema}.messages_history h WHERE h.id = (SELECT id FROM target)
    LIMIT 1
)
SELECT m.id, m.sink, m.dedup_key, m.payload, m.headers, COALESCE(m.ordering_key, ''), m.status,
       m.attempts, m.max_attempts, m.available_at, m.created_at, m.updated_at, m.sent_at,
       m.lease_expires_at, COALESCE(m.last_error, ''), m.receipt,
       COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'failed_at', a.failed_at, 'error', a.error, 'details', a.details) ORDER BY a.failed_at, a.attempt)
                 FROM {schema}.failed_attempts a WHERE a.message_id = m.id), '[]'),
       m.fallback, m.last_attempt
FROM found m

-- name: sink_audit :many
-- capacity: limit
-- params: sink text, since timestamptz, limit bigint
-- returns: id bigint, at timestamptz, actor text, role text, source text, action text, sink text
-- returns: filter jsonb null as []byte, count bigint, detail jsonb null as []byte
-- The audit trail's entries about sink $1 (its pauses, resumes, which
-- close its breakers, removed pauses, redrives and purges) recorded at or
-- after $2, newest first, at most $3: a sink's page shows them as its
-- history. The at index bounds the scan to the span asked for.
SELECT id, at, actor, role, source, action, sink, filter, count, detail
FROM {schema}.audit_log
WHERE sink = $1 AND at >= $2
ORDER BY at DESC, id DESC
LIMIT $3

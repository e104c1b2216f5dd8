-- name: audit_list :many
-- capacity: limit
-- params: since timestamptz, limit bigint
-- returns: id bigint, at timestamptz, actor text, role text, source text, action text, sink text
-- returns: filter jsonb null as []byte, count bigint, detail jsonb null as []byte
-- The audit trail's entries recorded at or after $1, newest first, at most
-- $2 of them (the at index serves the scan).
SELECT id, at, actor, role, source, action, sink, filter, count, detail
FROM {schema}.audit_log
WHERE at >= $1
ORDER BY at DESC, id DESC
LIMIT $2

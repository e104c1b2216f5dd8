-- name: dead_letter_groups :many
-- capacity: limit
-- params: sink text, limit bigint
-- returns: sink text, last_error text, dead bigint, last_died timestamptz
-- Dead letters grouped by sink and last error (of sink $1 unless ''),
-- the largest groups first, at most $2 of them: what an operator reads
-- first when many messages died for a few reasons. It reads the dead rows
-- only (the dead index), not the table.
SELECT sink, COALESCE(last_error, ''), count(*), max(updated_at)
FROM {schema}.messages
WHERE phase = 'dead' AND ($1 = '' OR sink = $1)
GROUP BY sink, COALESCE(last_error, '')
ORDER BY count(*) DESC, sink, COALESCE(last_error, '')
LIMIT $2

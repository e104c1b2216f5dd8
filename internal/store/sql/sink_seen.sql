-- name: sink_seen :one
-- params: sink text
-- returns: seen boolean
-- Whether the outbox knows sink $1: it has rows of it (one probe of the
-- (sink, dedup_key) index) or state of it (a pause, a rate limit's clock).
SELECT EXISTS (SELECT FROM {schema}.messages WHERE sink = $1)
    OR EXISTS (SELECT FROM {schema}.sink_limits WHERE sink = $1)

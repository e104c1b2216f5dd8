-- name: sink_seen :one
-- params: sink text
-- returns: seen boolean
-- Whether the outbox knows sink $1: it has rows of it (one probe of the
-- (sink, dedup_key) index; a delivered row's key, migration 013) or state of it (a pause, a rate limit's clock).
SELECT EXISTS (SELECT FROM {schema}.messages WHERE sink = $1)
    OR EXISTS (SELECT FROM {schema}.message_keys WHERE sink = $1)
    OR EXISTS (SELECT FROM {schema}.sink_limits WHERE sink = $1)

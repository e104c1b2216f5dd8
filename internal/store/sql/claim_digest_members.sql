-- name: claim_digest_members :many
-- params: ids bigint[], token uuid, lease interval
-- returns: id bigint, digest_id bigint, delivery_id text, joined boolean
-- returns: sink text, dedup_key text, payload jsonb, headers jsonb, ordering_key text null
-- returns: attempts integer as int, max_attempts integer null, created_at timestamptz, reclaimed boolean
-- returns: route text null, route_version bigint null, thread_key text null
-- returns: lease_from_start interval
-- Follows a claim of a sink that digests (docs/digests.md): of the rows
-- @ids just claimed under lease token @token, those that belong to a
-- digest not yet sent (migration 018) come back with it, and the digest's
-- other open members join the claim under the same token and a lease of
-- @lease (joined: returned in full, as claim.sql returns its rows), so a
-- digest that failed or lost its relay is sent again whole, as the same
-- digest. A member another relay holds under a live lease is not taken:
-- the relay sends the digest with the members it holds (see
-- (*digester).join and group in core/relay/digest.go). Rows of sent
-- digests are not returned: they are digested afresh.
--
-- Durable like the claim it follows (see claim.sql).
WITH mine AS (
    SELECT m.id, m.digest_id FROM {schema}.messages m
    WHERE m.id = ANY(@ids::bigint[]) AND m.lease_token = @token AND m.digest_id IS NOT NULL
), live AS (
    SELECT d.id, d.delivery_id FROM {schema}.digests d
    WHERE d.id IN (SELECT digest_id FROM mine) AND d.sent_at IS NULL
), rest AS (
    SELECT m.ctid, m.id, m.status = 'in_progress' AS reclaimed FROM {schema}.messages m
    WHERE m.digest_id IN (SELECT id FROM live) AND m.phase = 'open' AND NOT m.id = ANY(@ids::bigint[])
      AND (m.status <> 'in_progress' OR m.lease_expires_at <= now())
    FOR UPDATE SKIP LOCKED
), joined AS (
    UPDATE {schema}.messages m
    SET status = 'in_progress', attempts = m.attempts + 1, lease_token = @token,
        lease_expires_at = clock_timestamp() + @lease::interval, updated_at = now()
    WHERE m.ctid = ANY(ARRAY(SELECT ctid FROM rest))
      AND (SELECT current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) = 'on')
    RETURNING m.id, m.digest_id, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key, m.attempts, m.max_attempts,
              m.created_at, m.route, m.route_version, m.thread_key, m.lease_expires_at - now() AS lease_from_start
)
SELECT mine.id, mine.digest_id, live.delivery_id, false, '', '', 'null'::jsonb, '{}'::jsonb, NULL::text, 0, NULL::int,
       now(), false, NULL::text, NULL::bigint, NULL::text, interval '0'
FROM mine JOIN live ON live.id = mine.digest_id
UNION ALL
SELECT j.id, j.digest_id, live.delivery_id, true, j.sink, j.dedup_key, j.payload, j.headers, j.ordering_key, j.attempts,
       j.max_attempts, j.created_at, j.id IN (SELECT id FROM rest WHERE reclaimed), j.route, j.route_version, j.thread_key,
       j.lease_from_start
FROM joined j JOIN live ON live.id = j.digest_id

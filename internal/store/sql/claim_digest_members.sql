-- name: claim_digest_members :many
-- params: ids bigint[], token uuid, lease interval
-- returns: id bigint, digest_id bigint, delivery_id text, joined boolean, held boolean
-- returns: sink text, dedup_key text, payload jsonb, headers jsonb, ordering_key text null
-- returns: attempts integer as int, max_attempts integer null, created_at timestamptz, reclaimed boolean
-- returns: route text null, route_version bigint null, thread_key text null
-- returns: lease_from_start interval, deferrals integer as int
-- Follows a claim of a sink that digests (docs/digests.md): of the rows
-- @ids just claimed under lease token @token, those that belong to a
-- digest of their sink not yet sent (migration 018) take the digest whole
-- or not at all, so that one relay sends it, with the members it was
-- recorded with (less those that died since), and no relay ever sends a
-- part of it under its delivery id (issue 40, item 6).
--
-- A digest is taken when no other relay holds it (migration 029: no
-- member in progress under its holder's token with a live lease) and
-- every open member can be locked now: its holder becomes @token and its
-- other open members join the claim under @token and a lease of @lease
-- (joined: returned in full, as claim.sql returns its rows), taken from
-- another relay's claim if need be (that relay finds them gone, below,
-- and its token-guarded writes leave them alone). A member still in
-- progress under a live lease was claimed a moment ago by that claim,
-- which counted the attempt already: it is not counted again.
--
-- A joined member comes with its deferrals, as a claimed row does: the
-- members of a digest share its outcome, and a member joined without
-- them was spared its last attempt while the others died, so a later
-- post of the digest carried a member fewer under its delivery id
-- (torture seed 4).
--
-- Returned with held false, for the relay to hand back untouched: a row
-- of @ids whose digest was not taken (held by another relay, or a member
-- locked by another statement), and a row no longer under @token (another
-- relay took its digest since). Returned with held true: the rows of @ids
-- in a digest taken, with it, and the members joined. Rows of @ids in no
-- open digest are not returned: they are digested afresh, as are the rows
-- of a sent digest.
--
-- The statement waits for no lock (SKIP LOCKED throughout), so it never
-- deadlocks with another relay taking the same digest or with a finish.
-- Durable like the claim it follows (see claim.sql).
WITH mine AS (
    SELECT m.id, m.digest_id FROM {schema}.messages m
    JOIN {schema}.digests d ON d.id = m.digest_id AND d.sink = m.sink AND d.sent_at IS NULL
    WHERE m.id = ANY(@ids::bigint[]) AND m.lease_token = @token
), gone AS (
    SELECT i.id FROM unnest(@ids::bigint[]) AS i(id)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.messages m WHERE m.id = i.id AND m.lease_token = @token)
), candidates AS (
    -- Locked, so two relays do not take one digest at once; read as it is
    -- now, not as the statement's snapshot saw it.
    SELECT d.id, d.sink, d.delivery_id, d.holder FROM {schema}.digests d
    WHERE d.id IN (SELECT digest_id FROM mine) AND d.sent_at IS NULL
    ORDER BY d.id
    FOR UPDATE SKIP LOCKED
), free AS (
    SELECT c.* FROM candidates c
    WHERE c.holder IS NULL OR NOT EXISTS (
        SELECT 1 FROM {schema}.messages h
        WHERE h.digest_id = c.id AND h.lease_token = c.holder AND h.status = 'in_progress' AND h.lease_expires_at > now())
), members AS (
    -- Locked and read as they are now: a member the digest's holder took
    -- after this statement's snapshot, or one that died meanwhile, is left
    -- out, and then the count below falls short.
    SELECT m.ctid, m.id, m.digest_id, m.lease_token IS NOT DISTINCT FROM @token AS mine, m.status = 'in_progress' AS reclaimed
    FROM {schema}.messages m JOIN free f ON f.id = m.digest_id AND f.sink = m.sink
    WHERE m.phase = 'open'
      AND NOT (m.lease_token IS NOT DISTINCT FROM f.holder AND m.status = 'in_progress' AND m.lease_expires_at > now())
    FOR UPDATE OF m SKIP LOCKED
), taken AS (
    SELECT f.id, f.delivery_id FROM free f
    WHERE (SELECT count(*) FROM members x WHERE x.digest_id = f.id)
        = (SELECT count(*) FROM {schema}.messages m WHERE m.digest_id = f.id AND m.sink = f.sink AND m.phase = 'open')
), hold AS (
    UPDATE {schema}.digests d SET holder = @token WHERE d.id IN (SELECT id FROM taken)
    RETURNING d.id
), joined AS (
    UPDATE {schema}.messages m
    SET status = 'in_progress', lease_token = @token, lease_expires_at = clock_timestamp() + @lease::interval, updated_at = now(),
        attempts = m.attempts + CASE WHEN m.status = 'in_progress' AND m.lease_expires_at > now() THEN 0 ELSE 1 END
    WHERE m.ctid = ANY(ARRAY(SELECT x.ctid FROM members x JOIN taken t ON t.id = x.digest_id WHERE NOT x.mine))
      AND (SELECT current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) = 'on')
    RETURNING m.id, m.digest_id, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key, m.attempts, m.max_attempts,
              m.created_at, m.route, m.route_version, m.thread_key, m.lease_expires_at - now() AS lease_from_start,
              m.deferrals
)
SELECT mine.id, mine.digest_id, COALESCE(t.delivery_id, ''), false, t.id IS NOT NULL,
       '', '', 'null'::jsonb, '{}'::jsonb, NULL::text, 0, NULL::int,
       now(), false, NULL::text, NULL::bigint, NULL::text, interval '0', 0
FROM mine LEFT JOIN taken t ON t.id = mine.digest_id
UNION ALL
SELECT gone.id, 0, '', false, false, '', '', 'null'::jsonb, '{}'::jsonb, NULL::text, 0, NULL::int,
       now(), false, NULL::text, NULL::bigint, NULL::text, interval '0', 0
FROM gone
UNION ALL
SELECT j.id, j.digest_id, t.delivery_id, true, true, j.sink, j.dedup_key, j.payload, j.headers, j.ordering_key, j.attempts,
       j.max_attempts, j.created_at, j.id IN (SELECT id FROM members WHERE reclaimed), j.route, j.route_version, j.thread_key,
       j.lease_from_start, j.deferrals
FROM joined j JOIN taken t ON t.id = j.digest_id

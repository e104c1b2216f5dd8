-- name: finish :many
-- params: tokens as [][16]byte, errors as []*string, delete_sent boolean
-- returns: id bigint, token uuid as pgtype.UUID
-- Writes a batch of delivery outcomes in one statement. @ids and @tokens
-- hold every outcome's row id and lease token; the other arrays hold,
-- for the outcomes that are not deliveries, which come first: @statuses
-- new status, @delays delay in seconds before the next attempt, @errors
-- error, @refunds refund (1 gives the attempt back), @deferred deferral
-- (1: a Retry-After put the row off, counted in deferrals, migration
-- 010). The delivered outcomes follow, with an id and a token alone (a
-- NULL status; 'sent' is taken too): almost every outcome is one, and
-- five arrays of a thousand values each that say nothing cost the relay
-- their encoding and the server their unnesting (1,000 delivered
-- outcomes: 8.3 against 9.4 ms a write; docs/performance.md, "Issue 22,
-- seventh pass"). The test is estimated as the one of a status alone
-- was, which keeps the generic plan (see leased). @receipts is one JSON
-- object of the outcomes'
-- receipts keyed "id/token" (NULL: none has one; see the completer's
-- byLease): a row looks its own up by a binary search of the
-- keys, where a join of the rows to the receipts would follow the
-- statistics. Delivered rows move to messages_history
-- (migration 013) in the same statement, keeping their dedup keys; with
-- @delete_sent (Config.DeleteOnSent) they are deleted with their keys.
--
-- The lease token guard makes a late completion from a relay whose lease
-- expired (a zombie) change nothing: the row was re-claimed under a new
-- token. A token is only ever set on in_progress rows (a CHECK constraint
-- holds it), so the token test is the status test; spelling out
-- status = 'in_progress' as well can lead the planner to walk the lease
-- index instead of the primary key. Failed attempts are recorded for
-- operators; a refunded attempt (RetryAfter, a released row) is not.
-- The first delivered row of a thread (migration 003) becomes its root:
-- its receipt is kept in threads for the thread's later rows; a later row
-- only marks the thread as in use.
-- A delivered fallback row (migration 028) keeps its fallback mark.
-- @details is one JSON object of the attempts' details (migration 031:
-- start, duration, the receiver's status, answer and address) keyed
-- "id/token" as @receipts is (NULL: no outcome has any): a failed
-- attempt's go on its failed_attempts row, every outcome's on the row
-- (last_attempt), which a delivered row takes into history.
-- A delivered row that went out in a digest (migration 018) keeps its
-- digest_id in history, and its digest is marked sent: the digest's rows
-- are all finished in this one statement (see relay's digests).
-- Returns the outcomes written, each as its row's id and the lease token
-- it was delivered under; an outcome missing from the answer was a
-- zombie's. The token tells two outcomes of one row apart (a late one
-- under an expired lease and the current one can share a batch): by the
-- id alone, both were reported written.
--
-- Plans that do not depend on statistics. Delivered rows, almost every
-- outcome, are found as the bare loop of bench/ finds them: one scan of
-- the primary key for all their ids, the lease test a hash of the
-- (id, token) pairs built once. Every other outcome finds its row by one
-- probe of the primary key (a LATERAL lookup, so the outcomes are the
-- outer side whatever the estimates) and the update takes the rows by
-- their TIDs, the versions the statement's snapshot saw. Either way a row
-- changed since by another transaction (re-claimed after its lease
-- expired, purged) is left alone: PostgreSQL tests the changed row again
-- and its token no longer matches. Joined to the outcomes by id, the
-- plan's shape followed the table's statistics, which for a queue table
-- say it holds next to nothing (autovacuum analyzes it drained): a cached
-- generic plan read messages_pkey whole for every write (a 3-minute soak
-- at 5,000 msg/s: up to 20 s per write, a backlog of 292,000); a plan made
-- with the values scanned the 1,000 outcomes once per row, a nested loop
-- of a million steps (0.2-0.9 s per write; docs/performance.md, "Issue 22,
-- third pass"). As no shape follows an estimate, the statement is
-- prepared once per connection and its generic plan cached (test/plans
-- TestFinishPlansStayIndexPlansWithoutStatistics checks generic and
-- custom plans alike). Finding the delivered rows by one probe each and
-- deleting them by TID, as every outcome was until the sixth pass, cost
-- 13.5 ms per 1,000 delivered rows against 9.8 now and the bare loop's
-- 7.9 (18.3 against 10.6 with a receipt each; docs/performance.md,
-- "Issue 22, sixth pass").
WITH f AS (
    SELECT * FROM unnest(@ids::bigint[], @tokens::uuid[], @statuses::text[], @delays::float8[], @errors::text[], @refunds::int[], @deferred::int[])
        AS t(id, token, status, delay_seconds, error, refund, deferred)
), sent AS MATERIALIZED (
    -- The delivered outcomes. A delivered attempt is never refunded or
    -- put off and has no error: only its receipt is written.
    SELECT f.id, f.token FROM f WHERE f.status IS NULL OR f.status = 'sent'
), leased AS MATERIALIZED (
    -- Each other outcome with its row's TID, while this relay's lease
    -- holds. LIMIT 1 (an id names one row) keeps the lookup a subquery
    -- run per outcome: without it the planner pulls it up into a plain
    -- join and orders that by the statistics again. The other statuses
    -- are named rather than "not sent": the planner estimates an IN list
    -- at a few rows whatever the batch's size, and "not sent" at nearly
    -- every outcome, which made a small batch's plan made with its values
    -- look cheaper than the cached generic plan, so that the plan cache
    -- planned every terminal write anew (test/plans
    -- TestFinishKeepsItsGenericPlanForAnyBatchSize).
    SELECT r.row_tid, f.* FROM f CROSS JOIN LATERAL (
        SELECT m.ctid AS row_tid FROM {schema}.messages m WHERE m.id = f.id AND m.lease_token = f.token LIMIT 1
    ) r
    WHERE f.status IN ('pending', 'failed', 'dead')
), gone AS (
    -- A delivered row leaves the hot table (migration 013): it moves to
    -- messages_history, or with @delete_sent it is deleted. The rows are
    -- found as the bare loop finds them, one scan of the primary key for
    -- all ids; the lease test is a hash of the (id, token) pairs built
    -- once. IS TRUE keeps that test a filter: a plain IN would be pulled
    -- up into a join ordered by the statistics. Without a receipt object
    -- (NULL, the usual batch) no row builds its "id/token" key.
    DELETE FROM {schema}.messages m
    WHERE m.id = ANY(ARRAY(SELECT s.id FROM sent s))
      AND ((m.id, m.lease_token) IN (SELECT s.id, s.token FROM sent s)) IS TRUE
    RETURNING m.id, m.lease_token, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key, m.attempts,
              m.max_attempts, m.deferrals, m.available_at, m.last_error,
              CASE WHEN @receipts::jsonb IS NULL THEN m.receipt
                   ELSE COALESCE(@receipts::jsonb -> (m.id::text || '/' || m.lease_token::text), m.receipt) END AS receipt,
              m.created_at, m.route, m.thread_key, m.route_version, m.digest_id, m.fallback,
              CASE WHEN @details::jsonb IS NOT NULL
                   THEN @details::jsonb -> (m.id::text || '/' || m.lease_token::text) END AS last_attempt
), history AS (
    INSERT INTO {schema}.messages_history (slot, id, sink, dedup_key, payload, headers, ordering_key, attempts, max_attempts,
        deferrals, available_at, last_error, receipt, created_at, updated_at, sent_at, route, thread_key, route_version, digest_id,
        fallback, last_attempt)
    SELECT (SELECT s.slot FROM {schema}.history_slots s WHERE s.state = 'current'), g.id, g.sink, g.dedup_key, g.payload,
           g.headers, g.ordering_key, g.attempts, g.max_attempts, g.deferrals, g.available_at, g.last_error, g.receipt,
           g.created_at, now(), now(), g.route, g.thread_key, g.route_version, g.digest_id, g.fallback, g.last_attempt
    FROM gone g WHERE NOT @delete_sent
), keyed AS (
    -- The key stays for the retention window; a row stored before
    -- migration 013 gets the key it lacked.
    INSERT INTO {schema}.message_keys (sink, dedup_key, id)
    SELECT g.sink, g.dedup_key, g.id FROM gone g WHERE NOT @delete_sent
    ON CONFLICT (sink, dedup_key) DO NOTHING
), unkeyed AS (
    -- Deleted on delivery, the row frees its key at once, as before.
    DELETE FROM {schema}.message_keys k USING gone g
    WHERE @delete_sent AND k.sink = g.sink AND k.dedup_key = g.dedup_key AND k.id = g.id
), digests_sent AS (
    UPDATE {schema}.digests d SET sent_at = now()
    WHERE d.id IN (SELECT g.digest_id FROM gone g WHERE g.digest_id IS NOT NULL) AND d.sent_at IS NULL
), deleted_errors AS (
    DELETE FROM {schema}.failed_attempts
    WHERE @delete_sent AND message_id IN (SELECT id FROM gone WHERE attempts > 1)
), done AS (
    UPDATE {schema}.messages m
    SET status = f.status,
        attempts = m.attempts - f.refund,
        deferrals = m.deferrals + f.deferred,
        available_at = CASE WHEN f.status IN ('failed', 'pending') THEN now() + f.delay_seconds * interval '1 second' ELSE m.available_at END,
        last_error = COALESCE(f.error, m.last_error),
        receipt = COALESCE(@receipts::jsonb -> (f.id::text || '/' || f.token::text), m.receipt),
        last_attempt = COALESCE(@details::jsonb -> (f.id::text || '/' || f.token::text), m.last_attempt),
        lease_token = NULL, lease_expires_at = NULL, updated_at = now()
    FROM leased f
    WHERE m.ctid = f.row_tid AND m.lease_token = f.token
    -- A thread's receipt only (see thread_roots): copying every row's
    -- receipt out of the update would cost the other rows for nothing.
    RETURNING m.id, f.token, m.attempts, f.error, f.refund, f.status, m.sink, m.thread_key,
              CASE WHEN m.thread_key IS NOT NULL THEN m.receipt END AS receipt,
              @details::jsonb -> (f.id::text || '/' || f.token::text) AS details
), recorded AS (
    -- Reads the outcome back from RETURNING: joining done to f again would
    -- be a nested loop over two CTE scans, quadratic in the batch size.
    INSERT INTO {schema}.failed_attempts (message_id, attempt, error, details)
    SELECT id, attempts, error, details FROM done
    WHERE error IS NOT NULL AND refund = 0
), thread_roots AS (
    INSERT INTO {schema}.threads AS t (sink, thread_key, root_id, root_receipt)
    SELECT DISTINCT ON (s.sink, s.thread_key) s.sink, s.thread_key, s.id, s.receipt
    FROM gone s
    WHERE s.thread_key IS NOT NULL AND s.receipt IS NOT NULL
    ORDER BY s.sink, s.thread_key, s.id
    ON CONFLICT (sink, thread_key) DO UPDATE SET last_sent_at = now()
)
SELECT id, token FROM done UNION ALL SELECT id, lease_token FROM gone

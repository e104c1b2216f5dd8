-- name: claim :many
-- capacity: limit
-- params: limit bigint as int, token uuid, waiter bigint, probe_sink text
-- returns: id bigint, sink text, dedup_key text, payload jsonb, headers jsonb, ordering_key text null
-- returns: attempts integer as int, max_attempts integer null, created_at timestamptz, reclaimed boolean
-- returns: route text null, route_version bigint null, thread_key text null
-- returns: thread_root jsonb null as json.RawMessage, deferrals integer as int
-- returns: lease_from_start interval, available_at timestamptz
-- Claims up to @limit rows of the sinks @sinks in one statement, each sink's
-- in available_at order: rows ready for an attempt (pending, or failed and due) and rows
-- whose lease expired (their relay died or overran). Each gets lease token
-- @token, a lease of @lease on the database clock, and attempts+1 at claim time, so
-- a message that crashes its relay still runs out of attempts.
--
-- A lease starts when its row is leased (clock_timestamp()), not when the
-- statement started (now()): a claim held up before it leases (a lock on
-- its path, a bad plan's long scan) would otherwise hand out leases already
-- spent, which another claim may take again at once. Each row returns how
-- long after the statement's start its lease ends (lease_from_start): the
-- relay adds that to its own clock's reading from before it sent the
-- statement, a bound that never ends after the database's lease does,
-- whatever the clocks of the two hosts say. Expiry is judged against now(),
-- the earlier time: the claim never takes a lease still running.
--
-- The update changes no indexed column (see migration 005): it is a HOT
-- update, writing no index entry. Rows in flight therefore stay in the open
-- index, at the head of their sink's part, and the scan passes over them
-- unless their lease has expired.
--
-- What a claim cannot take costs it nothing (migration 012). The open index
-- is led by the sink and each sink is read on its own, a part of the index
-- of its own: rows of other sinks are never read. Sinks paused by a
-- Retry-After or with an open breaker leave the list before any row is
-- read (claimable), not row by row. The sinks share @limit in list order:
-- each takes at most an even share of what the sinks before it left, so
-- the relay lists the sinks it expects the most rows of last (see
-- claimOrder) and one sink's backlog cannot hold the claim of another's
-- new rows behind it. Each sink's rows are locked as its scan reads them
-- (FOR UPDATE SKIP LOCKED).
--
-- Keys blocked by ordering cost nothing either (migration 017). A row
-- inserted while an earlier row of its key was open is queued behind it
-- (queued_behind, set once at insert), and the walk in available_at order
-- reads only the sink's rows that are not: rows without a key and each
-- key's first. The queued rows are found through messages_queued_idx one
-- key at a time, a loose index scan (the recursive CTE head): the oldest
-- queued row of each key, a candidate when it has become its key's head
-- (no earlier open row of the key, on any sink) and is ready. A hot key
-- with 100,000 rows behind a head in flight costs a claim one step, where
-- the walk read all 100,000. Both kinds of candidate are merged in
-- available_at order and the share's oldest taken; each kind locks up to
-- the share as it reads, so a claim may hold, until it commits, locks on
-- up to one share of rows it does not take (another claim skips them and
-- takes the next). The walk over keys filters on phase <> 'sent' AND
-- phase <> 'dead', never phase = 'open', and looks the heads up by TID:
-- the open and ordering indexes cannot serve them, so no statistics can
-- turn a step per key into a read of every queued row.
--
-- Plans that do not depend on statistics: the update finds its rows by
-- their TIDs alone (ctid = ANY(array), one heap visit each, whatever the
-- table's size), so no join whose shape follows a row estimate (with
-- statistics that said almost no row was open, the planner joined the
-- claimed rows to the table by a nested loop that probed the primary key
-- with every claimed id for each claimed row: 35 ms for 1,000 rows,
-- against 5 ms). The TID is the locked version's; should a concurrent
-- transaction have committed a new version of a row between this
-- statement's snapshot and its lock, that version is not visible to the
-- update, and the row is left as it was (locked until the claim commits,
-- then claimable again), never claimed twice. Whether a row was reclaimed
-- comes from an array of the reclaimed ids (PostgreSQL 15 has no
-- RETURNING OLD). The relay prepares the statement once per connection
-- and PostgreSQL keeps a generic plan: planning it afresh took 1.5-2 ms
-- of a claim's 2.4 (pickup p50 2.6 ms against 0.8 ms cached). A plan
-- cached while the table was new and empty ("a few pages") would scan
-- the whole table once per claim when it had grown: the relay's
-- connections price that plan out (store.RelaySession, enable_seqscan
-- off; test/plans
-- TestClaimPlanCachedOnAnEmptyTableStaysAnIndexPlanWhenTheTableGrows).
--
-- A row with an ordering key is only ready when no earlier row of its key
-- is open (pending, in flight or failed): every keyed candidate, queued or
-- not, is checked (the mark decides only where the claim looks), through
-- messages_ordering_idx alone: "e.id + 0" is that index's column and no
-- other's (migration 026). Rows of sinks not in @sinks are never
-- touched: a relay claims only what it can deliver, so an older relay
-- leaves a newly added sink's rows alone. Sinks paused by a Retry-After are
-- skipped on the database's word, so a relay that has not heard of the
-- pause yet cannot claim their rows. So are sinks whose circuit breaker is
-- open (migration 008), but for @probe_sink: the one sink whose probe this
-- relay took, claimed alone with a @limit of 1. Returns each row, whether it was
-- reclaimed from an expired lease (the previous outcome is unknown), and for
-- a row of a thread the receipt of the thread's root (migration 003),
-- looked up only for such rows, and how often a Retry-After put it off
-- (migration 010).
--
-- A claim that takes a row of a sink in @durable_sinks commits durably
-- even on the relay's asynchronous connections (synchronous_commit off,
-- see relay.Config.DurableRelayWrites): its commit waits for the WAL
-- flush, so a delivery that may have started is never forgotten by a
-- PostgreSQL crash. A forgotten claim would bring the row back as a fresh
-- first attempt, and a sink without an idempotency key (Slack) would post
-- again without looking for its earlier post; a remembered one comes back
-- as an expired lease, Uncertain. The relay names there the sinks that
-- look for an Uncertain attempt's effect (sink.UncertainChecker); other
-- sinks' claims commit asynchronously, like terminal writes: the flush
-- was the claim's largest cost, one WAL flush (milliseconds on a busy
-- disk) between a message's commit and its delivery, and a crash that
-- forgets such a claim only delivers the row again as a first attempt,
-- under the same dedup key. The setting is raised for this transaction
-- only, by the update's filter on the first row of such a sink (the
-- sub-select runs once, when a row first needs it), and never lowered (a
-- server default above on stays). Terminal writes stay asynchronous:
-- losing one only repeats a delivery the row already knows may have
-- happened.
--
-- A sink's walk may start at @after[i] (aligned with @sinks; a missing or
-- NULL element: from the start): rows of the sink that are not queued and
-- whose available_at is earlier are not read. Delivered rows leave the
-- table, but their entries stay at the head of the sink's part of the open
-- index until vacuum removes them, and a transaction held open keeps
-- vacuum from doing so: every claim then visited each such entry's heap
-- tuple, thousands after a few seconds, hundreds of microseconds each
-- (pickup p99 2.7x under a held XID). The relay passes a bound a little
-- before the latest row it claimed of the sink, and claims from the start
-- once per poll interval, which finds what a bound passes over: expired
-- leases, and rows that became ready with an earlier available_at (a
-- producer's transaction that committed late, a row handed back). See
-- relay's claimBounds.
--
-- The same statement updates the claiming loop's wake-up registration @waiter
-- (migration 006): it waits for a wake-up exactly when it got fewer rows
-- than it asked for, and it stays alive for @alive_for. It writes only
-- what changes: whether the loop waits, or a life with less than half of
-- @alive_for left. A claim that rewrote the row each time left a version
-- per claim that a transaction held open keeps from being removed (500 a
-- second at 2,000 messages a second), and every claim and every
-- producer's wake-up read them all.
WITH RECURSIVE claimable AS MATERIALIZED (
    SELECT coalesce(array_agg(s.sink ORDER BY s.ord), '{}') AS sinks,
           coalesce(array_agg(coalesce(s.after, '-infinity') ORDER BY s.ord), '{}') AS afters
    FROM unnest(@sinks::text[], @after::timestamptz[]) WITH ORDINALITY AS s(sink, after, ord)
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.sink_limits l WHERE l.sink = s.sink AND l.paused_until > now())
      AND NOT EXISTS (SELECT 1 FROM {schema}.destination_breakers b
                      WHERE b.sink = s.sink AND b.dest_key = '' AND b.sink <> @probe_sink)
), walk (i, remaining, rows, reclaimed) AS (
    -- One step per sink: i sinks done, remaining rows still to claim.
    SELECT 0, @limit::bigint, '{}'::tid[], '{}'::bigint[]
    UNION ALL
    SELECT w.i + 1, w.remaining - cardinality(got.rows), got.rows, got.reclaimed
    FROM walk w CROSS JOIN claimable c
    -- An even share of what is left, rounded up.
    CROSS JOIN LATERAL (SELECT c.sinks[w.i + 1] AS sink, c.afters[w.i + 1] AS after,
                               (w.remaining + cardinality(c.sinks) - w.i - 1) / (cardinality(c.sinks) - w.i) AS n) share
    CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(r.ctid), '{}') AS rows,
               coalesce(array_agg(r.id) FILTER (WHERE r.status = 'in_progress'), '{}') AS reclaimed
        FROM (
            -- The share's oldest of both kinds of candidate.
            SELECT x.ctid, x.id, x.status FROM (
                -- The sink's rows not queued behind their key, in order.
                -- sink IS NOT NULL: the open index's predicate (migration 012).
                SELECT * FROM (SELECT m.ctid, m.id, m.status, m.available_at FROM {schema}.messages m
                 WHERE m.sink = share.sink AND m.sink IS NOT NULL AND m.phase = 'open'
                   AND m.queued_behind = false AND m.available_at <= now() AND m.available_at >= share.after
                   AND (m.status <> 'in_progress' OR m.lease_expires_at <= now())
                   AND (m.ordering_key IS NULL OR NOT EXISTS (
                         SELECT 1 FROM {schema}.messages e
                         WHERE e.ordering_key = m.ordering_key AND e.id + 0 < m.id AND e.phase = 'open'))
                 ORDER BY m.available_at, m.id
                 LIMIT share.n
                 FOR UPDATE SKIP LOCKED) unqueued
                UNION ALL
                -- Rows queued behind their key (migration 017): each
                -- key's oldest, should it now be the key's head.
                SELECT * FROM (SELECT m.ctid, m.id, m.status, m.available_at FROM {schema}.messages m
                 WHERE m.ctid = ANY(ARRAY(
                         -- One step per key of the sink's queued rows.
                         WITH RECURSIVE head (ordering_key, ctid) AS (
                             (SELECT q.ordering_key, q.ctid FROM {schema}.messages q
                              WHERE q.sink = share.sink AND q.queued_behind AND q.phase <> 'sent' AND q.phase <> 'dead'
                              ORDER BY q.ordering_key, q.id LIMIT 1)
                             UNION ALL
                             SELECT nxt.ordering_key, nxt.ctid FROM head h CROSS JOIN LATERAL (
                                 SELECT q.ordering_key, q.ctid FROM {schema}.messages q
                                 WHERE q.sink = share.sink AND q.queued_behind AND q.phase <> 'sent' AND q.phase <> 'dead'
                                   AND q.ordering_key > h.ordering_key
                                 ORDER BY q.ordering_key, q.id LIMIT 1) nxt
                         )
                         SELECT head.ctid FROM head))
                   AND m.phase <> 'sent' AND m.phase <> 'dead' AND m.available_at <= now()
                   AND (m.status <> 'in_progress' OR m.lease_expires_at <= now())
                   AND NOT EXISTS (
                         SELECT 1 FROM {schema}.messages e
                         WHERE e.ordering_key = m.ordering_key AND e.id + 0 < m.id AND e.phase = 'open')
                 ORDER BY m.available_at, m.id
                 LIMIT share.n
                 FOR UPDATE SKIP LOCKED) heads
            ) x
            ORDER BY x.available_at, x.id
            LIMIT share.n
        ) r
    ) got
    WHERE w.i < cardinality(c.sinks) AND w.remaining > 0
), picked AS MATERIALIZED (
    SELECT (SELECT coalesce(array_agg(r), '{}') FROM walk CROSS JOIN unnest(walk.rows) r) AS rows,
           (SELECT coalesce(array_agg(id), '{}') FROM walk CROSS JOIN unnest(walk.reclaimed) id) AS reclaimed
), state AS MATERIALIZED (
    SELECT cardinality(rows) < @limit AS waiting FROM picked
), mark AS (
    UPDATE {schema}.waiters w
    SET waiting = s.waiting, alive_until = now() + @alive_for::interval
    FROM state s
    WHERE w.id = @waiter
      AND (w.waiting <> s.waiting OR w.alive_until < now() + @alive_for::interval / 2)
)
UPDATE {schema}.messages m
SET status = 'in_progress', attempts = m.attempts + 1, lease_token = @token,
    lease_expires_at = clock_timestamp() + @lease::interval, updated_at = now()
WHERE m.ctid = ANY((SELECT rows FROM picked)::tid[])
  AND (m.sink <> ALL(coalesce(@durable_sinks::text[], '{}'))
       OR (SELECT current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) = 'on'))
RETURNING m.id, m.sink, m.dedup_key, m.payload, m.headers, m.ordering_key,
          m.attempts, m.max_attempts, m.created_at, m.id = ANY((SELECT reclaimed FROM picked)::bigint[]),
          m.route, m.route_version, m.thread_key,
          CASE WHEN m.thread_key IS NOT NULL THEN (
              SELECT t.root_receipt FROM {schema}.threads t WHERE t.sink = m.sink AND t.thread_key = m.thread_key)
          END,
          m.deferrals,
          m.lease_expires_at - now(), m.available_at

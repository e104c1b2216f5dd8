-- Targeted wake-ups. Every claim loop of every running relay registers
-- here with a notification channel of its own and the sinks it claims for;
-- its claims keep the row current. A producer's statement wakes one loop
-- that can take its message and is waiting for work (its last claim was not
-- full), instead of every relay of the cluster: no herd of empty claims, and
-- no notification at all while the loops are busy (they claim again by
-- themselves) or when no relay runs. A notification makes every committing
-- transaction that sent one queue behind the others for PostgreSQL's
-- notification lock, so skipping the useless ones lets producers commit in
-- parallel again (single-message enqueues on 8 connections: about twice as
-- many per second).
CREATE TABLE waiters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    channel     text        NOT NULL,
    sinks       text[]      NOT NULL,
    -- The loop's last claim was not full: it waits for a wake-up or its
    -- poll interval.
    waiting     boolean     NOT NULL DEFAULT true,
    -- Each claim moves it forward; a relay that died stops being woken
    -- once it passes.
    alive_until timestamptz NOT NULL
);

-- wake(sink) notifies the first waiting, live loop that claims for sink.
-- Transactional, like every pg_notify: the loop hears it when the caller
-- commits.
CREATE FUNCTION wake(sink text) RETURNS void
LANGUAGE sql
SET search_path FROM CURRENT
AS $fn$
    SELECT pg_notify(w.channel, '') FROM waiters w
    WHERE w.waiting AND w.alive_until > now() AND wake.sink = ANY(w.sinks)
    ORDER BY w.id
    LIMIT 1
$fn$;

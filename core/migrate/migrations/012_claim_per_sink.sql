-- Claims per sink (claim.sql): the open index is led by the sink, so a
-- claim reads only the rows of the sinks it claims for. Rows of other
-- sinks (a throttled sink's backlog, a paused or broken one, a sink no
-- relay has yet) are no longer rows a claim reads and throws away: 20,000
-- older rows of another sink made a claim of 10 rows read 855 buffers, 67
-- now (docs/performance.md, "Claims beside a million waiting rows").
--
-- The predicate also says sink IS NOT NULL, which every row satisfies
-- (the column is NOT NULL). It keeps the index to statements that name a
-- sink: the claim's check for an earlier open row of an ordering key
-- names none, and with statistics that show no open rows the planner
-- found the open index as cheap as messages_ordering_idx for it and read
-- the whole open index once per keyed row.
--
-- Building the index locks writes to the table while it reads the table
-- once (a migration runs in a transaction, so not CONCURRENTLY): migrate
-- a large outbox at a quiet time (about a second per million open rows).
DROP INDEX messages_open_idx;
CREATE INDEX messages_open_idx ON messages (sink, available_at, id)
    WHERE phase = 'open' AND sink IS NOT NULL;

-- ANALYZE reads a sample of every column; the payload and the other
-- columns no statement filters on are the large ones (a 64 KiB payload is
-- detoasted for each sampled row), and their statistics are never used.
-- Without them the statistics the plans use are cheap to keep fresh.
ALTER TABLE messages
    ALTER COLUMN payload SET STATISTICS 0,
    ALTER COLUMN headers SET STATISTICS 0,
    ALTER COLUMN receipt SET STATISTICS 0;

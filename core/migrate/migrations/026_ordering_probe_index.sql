-- The ordering check (is there an earlier open row of this row's key?,
-- claim.sql and passed_over.sql) reads messages_ordering_idx whatever the
-- statistics say. Written "e.id < m.id", the check was also a range of the
-- primary key, and with some statistics the planner took that range
-- instead: with those of a table analyzed at 500 rows and grown to 20,000,
-- under the custom and the generic plan alike, a probe that for a key's
-- head reads every older row of the table, a paused sink's million
-- included (test/plans
-- TestOrderingCheckProbesTheOrderingIndexWhateverTheStatistics). The
-- index's second column is now the expression id + 0, which the check
-- compares ("e.id + 0 < m.id"): no other index holds it, so the check has
-- one index to read and no estimate can choose another. It reads as
-- before: the key's rows in id order, stopping at the first older one or,
-- for a key's head, at once.
--
-- The index holds only keyed open rows; its rebuild reads the table once
-- and holds writes to it meanwhile: 0.28 s for a million rows, a tenth
-- of them keyed, on the development machine.
DROP INDEX messages_ordering_idx;
CREATE INDEX messages_ordering_idx ON messages (ordering_key, (id + 0))
    WHERE ordering_key IS NOT NULL AND phase = 'open';

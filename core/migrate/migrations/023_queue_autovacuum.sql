-- Autovacuum keeps up with the queue table (messages): every delivered row
-- is deleted from it (migration 013), tens of thousands a second under
-- load, and each dead row's index entries stay in the claim's path until
-- vacuum removes them. With the server's defaults a vacuum of it is
-- throttled (autovacuum_vacuum_cost_delay 2 ms) and waits for a fifth of
-- the table to be dead; under a sustained overload one pass ran for
-- minutes while millions of dead rows piled up, and the table was not
-- analyzed meanwhile (its worker analyzes after it vacuums), so a new
-- deployment's claims ran for minutes on a table never analyzed. The
-- queue table is vacuumed unthrottled, once 2 % of it is dead, and
-- analyzed once 2 % of it changed: its passes are short because they come
-- often. Vacuum does not truncate it: giving empty pages at its end back
-- takes the table's ACCESS EXCLUSIVE lock, which stops every claim,
-- terminal write and enqueue while it is held, and the next inserts would
-- only extend the table again. (docs/performance.md, "Issue 22 on a quiet
-- machine".)
ALTER TABLE messages SET (
    autovacuum_vacuum_cost_delay = 0,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    vacuum_truncate = false
);

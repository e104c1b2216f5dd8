-- Keys blocked by ordering cost a claim nothing. A row with an ordering key
-- can be claimed only as its key's head (no earlier open row of its key),
-- and the claim read every blocked row of its sink in available_at order
-- to find that out: one index entry, a heap visit and a probe of the
-- ordering index each. A hot key with 100,000 waiting rows behind its head
-- in flight cost every claim of its sink some 400,000 buffers.
--
-- queued_behind says that an open row of the row's key existed when the
-- row was inserted: the row was queued behind it. It is set once, by the
-- trigger below, and no statement changes it afterwards, so claims stay
-- HOT updates (migration 005). The open index puts a sink's queued rows
-- after its other rows, where the claim's walk in available_at order
-- (queued_behind = false) never reaches them; the claim finds their heads
-- instead with one step per key through messages_queued_idx, which holds
-- only queued rows (claim.sql). A row inserted while an earlier one of its
-- key was open but not yet committed is not marked; the claim still checks
-- every keyed row it takes for an earlier open row, so the mark only
-- decides where the claim looks, never whether a row may go.
ALTER TABLE messages ADD COLUMN queued_behind boolean NOT NULL DEFAULT false;

-- The mark costs an insert of a keyed row one probe of
-- messages_ordering_idx; rows without a key do not call the function.
-- SET search_path FROM CURRENT (the migration's, the outbox's schema)
-- makes `messages` this schema's whatever the producer's search_path is.
CREATE FUNCTION mark_queued_behind() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    NEW.queued_behind := EXISTS (
        SELECT 1 FROM messages e WHERE e.ordering_key = NEW.ordering_key AND e.phase = 'open');
    RETURN NEW;
END
$fn$;

CREATE TRIGGER messages_queued_behind BEFORE INSERT ON messages
    FOR EACH ROW WHEN (NEW.ordering_key IS NOT NULL) EXECUTE FUNCTION mark_queued_behind();

-- Rows waiting today behind an earlier open row of their key: marked as the
-- trigger would have marked them (each is rewritten once, with new index
-- entries; a large keyed backlog is best migrated at a quiet time).
UPDATE messages m SET queued_behind = true
WHERE m.ordering_key IS NOT NULL AND m.phase = 'open'
  AND EXISTS (SELECT 1 FROM messages e
              WHERE e.ordering_key = m.ordering_key AND e.id < m.id AND e.phase = 'open');

-- queued_behind second: a sink's unqueued rows are one range of the index
-- in available_at order, its queued rows another. Statements that read a
-- sink's open rows without regard to order (stats, waiting rows, breaker
-- and pause ends) use it by its leading column as before.
DROP INDEX messages_open_idx;
CREATE INDEX messages_open_idx ON messages (sink, queued_behind, available_at, id)
    WHERE phase = 'open' AND sink IS NOT NULL;

-- The queued rows of each sink by key: the claim's walk over keys reads
-- the first entry of each key, its oldest queued row. The predicate says
-- "open" as phase <> 'sent' AND phase <> 'dead', and the claim's walk
-- over keys says it so too, never phase = 'open': the predicates of the
-- open and ordering indexes then do not follow from the walk's filter, so
-- neither can serve it, whatever the statistics say (on a new table the
-- planner preferred the ordering index, read row by row).
CREATE INDEX messages_queued_idx ON messages (sink, ordering_key, id)
    WHERE queued_behind AND phase <> 'sent' AND phase <> 'dead';

-- A destination's row carries the revision of the destinations its
-- producer saw (docs/destinations.md): header
-- outboxd-destinations-revision, destinations_state's revision when the
-- row is inserted, however it is made (publish's fan-out,
-- enqueue_destination(), enqueue() with the outboxd-destination header).
-- Revisions are handed out in the order the changes commit (migration
-- 016), so a relay whose directory has read that revision holds every
-- change committed before the row was made (a rotated secret, an edited
-- URL, an enable) and delivers it without another read; a directory
-- behind it reads first. Without the revision the sink could only compare
-- the row's creation time with the directory's last read, and under
-- steady load nearly every row is newer than that read: a read of the
-- database before each delivery, 1.5 ms more pickup p50 at 100 events/s
-- (docs/performance.md, "Issue 22, seventh pass"). Rows made before this
-- migration keep that test.
--
-- The revision is read when the row is inserted, after the statement that
-- inserts it found its destination: never older than what that statement
-- saw. The header is outboxd's, like outboxd-destination: the sink never
-- sends it to the receiver, and a producer's own value for it is
-- replaced.
CREATE FUNCTION stamp_destinations_revision() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    NEW.headers := NEW.headers || jsonb_build_object('outboxd-destinations-revision',
        (SELECT s.revision FROM destinations_state s)::text);
    RETURN NEW;
END
$fn$;
CREATE TRIGGER messages_destinations_revision BEFORE INSERT ON messages
    FOR EACH ROW WHEN (NEW.headers ? 'outboxd-destination')
    EXECUTE FUNCTION stamp_destinations_revision();

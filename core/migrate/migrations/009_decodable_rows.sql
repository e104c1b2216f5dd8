-- The schema enforces what a relay relies on to read a row: headers are a
-- JSON object of strings (a relay reads them into map[string]string). It is
-- the one column a relay decodes itself: payload, receipt and a thread's
-- root receipt go to the sink (or the routing stage) as raw JSON, and what
-- a sink cannot read fails that row's delivery alone. enqueue() and
-- publish() refused such headers already; the constraint also refuses an
-- INSERT or UPDATE that goes around them (SQLSTATE 23514 naming
-- messages_headers_check).
--
-- A relay that still meets such a row (one written before this migration
-- or around it) dead-letters that row alone and delivers the rest of its
-- claim. Rows already stored are repaired here, before the constraint
-- exists (a claim or terminal write of a row that violates it would fail
-- the whole statement, every row of it): an open row is dead-lettered with
-- the same error a relay gives it, and every such row's headers are quoted
-- into last_error and then cleared, so nothing is lost.
--
-- The constraint is added NOT VALID, which checks new writes only and holds
-- the table's exclusive lock for an instant, not for a scan of the table.
-- Migrate validates it once the migrations have committed, in a transaction
-- of its own, through validate_constraints() below: VALIDATE CONSTRAINT
-- scans the table under a lock that lets reads and writes go on. The repair
-- runs again just before, for rows written between its first run and the
-- constraint.

CREATE FUNCTION dead_letter_undecodable_rows(OUT repaired bigint)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
BEGIN
    WITH bad AS (
        UPDATE messages m
        SET status = CASE WHEN m.phase = 'open' THEN 'dead' ELSE m.status END,
            lease_token = CASE WHEN m.phase = 'open' THEN NULL ELSE m.lease_token END,
            lease_expires_at = CASE WHEN m.phase = 'open' THEN NULL ELSE m.lease_expires_at END,
            last_error = CASE WHEN m.phase = 'open' THEN '' ELSE coalesce(m.last_error || E'\n', '') END
                || format('undecodable row: headers %s are not a JSON object of strings (cleared by migration 009)',
                          left(m.headers::text, 256)),
            headers = '{}', updated_at = now()
        WHERE NOT (jsonb_typeof(m.headers) = 'object'
                   AND NOT jsonb_path_exists(m.headers, '$.* ? (@.type() != "string")'))
        RETURNING m.id, m.attempts, m.last_error, m.status
    ), recorded AS (
        INSERT INTO failed_attempts (message_id, attempt, error)
        SELECT id, attempts, last_error FROM bad WHERE status = 'dead'
    )
    SELECT count(*) INTO repaired FROM bad;
END
$fn$;

SELECT dead_letter_undecodable_rows();

ALTER TABLE messages ADD CONSTRAINT messages_headers_check
    CHECK (jsonb_typeof(headers) = 'object'
           AND NOT jsonb_path_exists(headers, '$.* ? (@.type() != "string")'))
    NOT VALID;

-- Validates every constraint of the schema added NOT VALID, repairing the
-- rows it is about first. Migrate calls it after each run's commit; it does
-- nothing once every constraint is valid, so a run that was interrupted
-- before validating is finished by the next one.
CREATE FUNCTION validate_constraints()
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT k.conrelid::regclass AS rel, k.conname FROM pg_constraint k
             WHERE k.connamespace = current_schema()::regnamespace AND NOT k.convalidated
             ORDER BY k.conname
    LOOP
        IF c.conname = 'messages_headers_check' THEN
            PERFORM dead_letter_undecodable_rows();
        END IF;
        EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', c.rel, c.conname);
    END LOOP;
END
$fn$;

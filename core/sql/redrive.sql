-- Moves dead rows back to pending with their attempts reset and wakes a
-- relay loop for each of their sinks: the rows with ids $1, or with $2
-- every dead row (of sink $3 unless it is ''). Returns how many moved.
WITH moved AS (
    UPDATE {schema}.messages
    SET status = 'pending', attempts = 0, available_at = now(), updated_at = now(),
        lease_token = NULL, lease_expires_at = NULL
    WHERE phase = 'dead'
      AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)))
    RETURNING id, sink
), wake AS (SELECT {schema}.wake(s.sink) FROM (SELECT DISTINCT sink FROM moved) s)
SELECT count(*) FROM moved LEFT JOIN (SELECT count(*) FROM wake) w ON true

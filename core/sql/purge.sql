-- Deletes dead rows and their recorded failed attempts: the rows with ids
-- $1, or with $2 every dead row (of sink $3 unless it is ''). With $4 the
-- rows of sink $3 still waiting for delivery (pending or failed) go too:
-- the way to drop the rows of a sink no relay will ever have. Returns how
-- many rows were deleted.
WITH gone AS (
    DELETE FROM {schema}.messages
    WHERE (phase = 'dead' OR ($4 AND status IN ('pending', 'failed')))
      AND (id = ANY($1) OR ($2 AND ($3 = '' OR sink = $3)))
    RETURNING id
), errs AS (
    DELETE FROM {schema}.failed_attempts WHERE message_id IN (SELECT id FROM gone)
)
SELECT count(*) FROM gone

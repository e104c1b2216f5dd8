-- name: waiter_waits :exec
-- params: id bigint
-- Marks claim loop $1 as waiting for wake-ups although its last claim was
-- full (claim.sql marks a loop waiting only when its claim got fewer rows
-- than it asked for): a per-key loop whose claim found only blocked rate
-- keys waits for them, and producers' rows of other keys would otherwise
-- wait for that wait's end, not for a wake-up. Writes only when the mark
-- changes.
UPDATE {schema}.waiters SET waiting = true WHERE id = $1 AND NOT waiting

-- name: forget_sink :many
-- params: sink text, channel text, payload text
-- returns: was_paused boolean
-- Deletes sink $1's state (its pause, by hand or by a Retry-After, who
-- changed it last, and its rate limit's clock): a stale row an operator
-- removes, such as a pause of a name no relay delivers to. Notification $3
-- on channel $2 makes every running relay reload its pauses (a reload ends
-- the pauses the database no longer has). Returns one row, whether the
-- sink was paused, when there was state to delete, none otherwise.
WITH gone AS (
    DELETE FROM {schema}.sink_limits WHERE sink = $1
    RETURNING COALESCE(paused_until > now(), false) AS was_paused
), told AS (
    SELECT pg_notify($2, $3) FROM gone LIMIT 1
)
SELECT gone.was_paused FROM gone LEFT JOIN told ON true

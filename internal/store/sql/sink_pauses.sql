-- name: sink_pauses :many
-- returns: sink text, paused_until timestamptz null, by_hand boolean, until_resumed boolean
-- returns: changed_by text, change_reason text, changed_at timestamptz null
-- Every sink whose state an operator may want to see: paused now (by a
-- Retry-After or by hand) or changed by hand at some time. by_hand says
-- the pause in force is the operator's (no longer Retry-After outlasts it);
-- changed_by, change_reason and changed_at describe the last pause or
-- resume by hand.
SELECT sink, CASE WHEN paused_until > now() THEN paused_until END,
       COALESCE(paused_until > now() AND manual_until >= paused_until, false),
       COALESCE(until_resumed AND paused_until > now(), false),
       COALESCE(changed_by, ''), COALESCE(change_reason, ''), changed_at
FROM {schema}.sink_limits
WHERE paused_until > now() OR changed_at IS NOT NULL
ORDER BY sink

-- name: take_stats_lead :one
-- params: relay text, lead_timeout
-- returns: leads boolean
-- Makes relay $1 the one that computes sink_stats if it already is, or if
-- the lead has not been renewed for $2 (its relay is gone), and renews it.
-- Returns a row only when $1 leads. The row lock makes the takeover of a
-- stale lead go to exactly one relay.
INSERT INTO {schema}.sink_stats_lead AS l (taken_by, taken_at) VALUES ($1, now())
ON CONFLICT (one) DO UPDATE SET taken_by = $1, taken_at = now()
WHERE l.taken_by = $1 OR l.taken_at < now() - $2::interval
RETURNING true

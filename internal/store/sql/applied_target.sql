-- name: applied_target :one
-- params: route text, sink text
-- returns: template jsonb, update_root boolean
-- The template and update_root of route $1's target sink $2 as last
-- applied: from the active routes when they have it, else from the latest
-- version that had it (the route was removed, and a row it published is
-- still on its way). No row when no version ever had it.
SELECT t.template, t.update_root
FROM {schema}.route_targets t
LEFT JOIN {schema}.routes_active a ON a.version = t.version
WHERE t.route = $1 AND t.sink = $2
ORDER BY a.version IS NOT NULL DESC, t.version DESC
LIMIT 1

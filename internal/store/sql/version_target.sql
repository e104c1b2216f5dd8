-- name: version_target :one
-- params: version bigint, route text, sink text
-- returns: digest text, template jsonb, update_root boolean
-- The digest of routes version $1 and the template and update_root of its
-- route $2's target sink $3: what rendered a row published under that
-- version (versions are never changed once applied). No row when the
-- version has no such target.
SELECT rv.digest, t.template, t.update_root
FROM {schema}.route_versions rv
JOIN {schema}.route_targets t ON t.version = rv.version
WHERE rv.version = $1 AND t.route = $2 AND t.sink = $3

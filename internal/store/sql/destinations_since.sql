-- name: destinations_since :many
-- params: revision bigint
-- returns: id text, tenant text, url text, rate_limit double precision null, enabled boolean, revision bigint
-- returns: key_ids text[], sealed bytea[] as [][]byte, expires_at timestamptz[]
-- returns: auth_key_id text null, auth_sealed bytea null
-- The destinations changed after revision $1 (0: all of them) as a relay
-- delivers to them, with their signing secrets still valid, newest first
-- (sealed; expires_at is 9999-12-31 for a secret without an end), walking
-- destinations_revision_idx; and their authentication, sealed (NULL
-- without any, migration 034).
SELECT d.id, d.tenant, d.url, d.rate_limit, d.enabled, d.revision,
       ARRAY(SELECT s.key_id FROM {schema}.destination_secrets s
             WHERE s.destination_id = d.id AND coalesce(s.expires_at, 'infinity') > now() ORDER BY s.serial DESC),
       ARRAY(SELECT s.sealed FROM {schema}.destination_secrets s
             WHERE s.destination_id = d.id AND coalesce(s.expires_at, 'infinity') > now() ORDER BY s.serial DESC),
       ARRAY(SELECT coalesce(s.expires_at, '9999-12-31') FROM {schema}.destination_secrets s
             WHERE s.destination_id = d.id AND coalesce(s.expires_at, 'infinity') > now() ORDER BY s.serial DESC),
       a.key_id, a.sealed
FROM {schema}.destinations d
LEFT JOIN {schema}.destination_auth a ON a.destination_id = d.id
WHERE d.revision > $1
ORDER BY d.revision

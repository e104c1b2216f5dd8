-- name: destination_secret_add :one
-- params: tenant text, id text, key_id text, sealed bytea, overlap interval
-- returns: serial integer as int
-- Rotates destination $2's signing secret: adds the secret sealed under
-- key $3, lets the current ones sign for $5 more (not longer than they
-- already would), drops the expired ones, and touches the destination so
-- relays reload it. Returns the new secret's serial; no row when tenant
-- $1 has no such destination.
WITH d AS (
    UPDATE {schema}.destinations SET updated_at = now() WHERE tenant = $1 AND id = $2 RETURNING id
), expire AS (
    UPDATE {schema}.destination_secrets s
    SET expires_at = LEAST(coalesce(s.expires_at, 'infinity'), now() + $5::interval)
    WHERE s.destination_id IN (SELECT id FROM d)
    RETURNING s.serial, s.expires_at
), drop_expired AS (
    DELETE FROM {schema}.destination_secrets s
    WHERE s.destination_id IN (SELECT id FROM d) AND s.expires_at <= now()
), added AS (
    INSERT INTO {schema}.destination_secrets (destination_id, serial, key_id, sealed)
    SELECT d.id, 1 + coalesce((SELECT max(s.serial) FROM {schema}.destination_secrets s WHERE s.destination_id = d.id), 0), $3, $4
    FROM d
    RETURNING serial
)
SELECT serial FROM added

-- name: unlock_session :exec
-- params: namespace integer, schema text, key integer
-- Releases the session-level advisory lock taken by lock_session.sql.
SELECT pg_advisory_unlock($1, hashtext($2) # $3)

-- name: lock_session :one
-- params: namespace integer, schema text, key integer
-- returns: locked boolean
-- Tries to take the session-level advisory lock ($1 namespace, hash of
-- schema $2 xor key $3) and reports whether it did.
SELECT pg_try_advisory_lock($1, hashtext($2) # $3)

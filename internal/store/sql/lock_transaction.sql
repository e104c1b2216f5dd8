-- name: lock_transaction :exec
-- params: namespace integer, schema text, key integer
-- Waits for the transaction-level advisory lock ($1 namespace, hash of
-- schema $2 xor key $3); it is released at commit or rollback.
SELECT pg_advisory_xact_lock($1, hashtext($2) # $3)

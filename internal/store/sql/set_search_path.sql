-- name: set_search_path :exec
-- Makes unqualified names (in migration files) resolve to the outbox's
-- schema for the rest of the transaction.
SET LOCAL search_path TO {schema}

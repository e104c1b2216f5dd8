-- name: history_expiring :one
-- params: retention
-- returns: slot integer null as int32
-- The history slot whose rows have all been delivered longer ago than $1,
-- marked expiring (history_expiring(), migration 013); NULL when none is.
SELECT {schema}.history_expiring($1::interval)

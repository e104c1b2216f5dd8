-- name: validate_constraints :exec
-- Validates the constraints migrations added NOT VALID (migration 009's
-- validate_constraints()), after the migrations committed: VALIDATE scans
-- the table under a lock that lets reads and writes go on.
SELECT {schema}.validate_constraints()

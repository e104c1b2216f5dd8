-- name: destination_quota_use :one
-- params: tenant text, action text, window interval
-- returns: destinations bigint as int, recent bigint as int, oldest_recent timestamptz null
-- What tenant $1 uses of its quotas (package destinations): how many
-- destinations it has, and how many audit entries of action $2 (its test
-- events) it recorded within the last $3, with the oldest of them, which
-- is the first to leave the window. The caller holds the tenant's quota
-- lock (lock_transaction) and runs this as a statement of its own under
-- READ COMMITTED, so it sees what the lock's previous holder committed.
-- The audit_log_at index serves the window; a tenant's destinations are
-- read through destinations_tenant_idx.
SELECT
    (SELECT count(*) FROM {schema}.destinations WHERE tenant = $1),
    count(*),
    min(at)
FROM {schema}.audit_log
WHERE at > now() - $3::interval AND action = $2 AND filter->>'tenant' = $1

-- name: audit_record :exec
-- params: actor text, role text, source text, action text, sink text, filter jsonb null as []byte, count bigint, detail jsonb null as []byte
-- Records one operator action in the audit trail (migration 014): who
-- (@actor with @role, from @source), what (@action on sink @sink, '' for
-- none), the selection @filter, how many things it changed (@count) and
-- the rest (@detail). Run in the action's own transaction.
INSERT INTO {schema}.audit_log (actor, role, source, action, sink, filter, count, detail)
VALUES (@actor, @role, @source, @action, @sink, @filter, @count, @detail)

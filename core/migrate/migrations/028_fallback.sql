-- Fallback targets (issue 44, routing's fallback and fallback_after): a
-- route target's row whose sink stayed down goes to another sink instead.
-- The original row leaves messages for messages_history, as a delivered
-- row does, and a new row of the fallback sink takes its place, both in
-- one statement (fall_back.sql): exactly one of the two is ever open, so
-- exactly one of them is delivered.
--
-- fallback says which row stood in for which, and why: on the original,
-- {"to": <fallback sink>, "id": <the new row>, "reason": ...}; on the new
-- row, {"of": <the original row>, "from": <its sink>, "reason": ...}.
-- NULL on every other row: adding a column without a default rewrites
-- nothing, and the claim's HOT updates stay HOT (no index names it).
ALTER TABLE messages ADD COLUMN fallback jsonb;
ALTER TABLE messages_history ADD COLUMN fallback jsonb;

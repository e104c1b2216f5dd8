-- Digests (docs/digests.md): rows of one digest key delivered together as
-- one delivery. A digest is recorded before it is sent, in one durable
-- statement that also marks its members (record_digest.sql), so a digest
-- that fails, or whose relay dies in the middle of sending it, is sent
-- again as the same digest: the same members and the same delivery id,
-- which receivers and the Slack sink's duplicate check recognise. A new
-- claim regroups such rows by digest_id instead of windowing them again
-- (claim_digest_members.sql). sent_at is set by the finish statement that
-- delivers the members; a member redriven after that is a row like any
-- other, digested afresh.
CREATE TABLE digests (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink        text        NOT NULL,
    key         text        NOT NULL,
    delivery_id text        NOT NULL,
    created     timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
-- Pruned with delivered history (prune_digests.sql).
CREATE INDEX digests_created_idx ON digests (created);

-- NULL for a row that never went out in a digest: adding a nullable
-- column without a default rewrites nothing.
ALTER TABLE messages ADD COLUMN digest_id bigint;
ALTER TABLE messages_history ADD COLUMN digest_id bigint;
-- Regrouping a digest's members and listing a row's siblings read these;
-- partial, so rows outside digests add no index entry.
CREATE INDEX messages_digest_idx ON messages (digest_id) WHERE digest_id IS NOT NULL;
CREATE INDEX messages_history_digest_idx ON messages_history (digest_id) WHERE digest_id IS NOT NULL;

-- One relay sends a digest (issue 40, item 6; docs/digests.md): the
-- claim token under which a relay took a digest that is not yet sent,
-- with all its open members (record_digest.sql, claim_digest_members.sql).
-- The digest is held while any member is in progress under that token
-- with a live lease; then no other relay takes it or sends any of its
-- members. NULL on the digests recorded before this migration: no relay
-- holds them. Adding a column without a default rewrites nothing.
ALTER TABLE digests ADD COLUMN holder uuid;

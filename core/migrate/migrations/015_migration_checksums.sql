-- The ledger records the sha256 of each migration's SQL as applied, so
-- that `outboxd migrate status` shows what ran and can tell a migration
-- file changed after it was applied. Migrations applied before this one
-- have none (NULL): the binary that applied them did not record one.
-- Migrate records the checksums of the migrations of its run after the
-- last of them (this one among them) applied.

ALTER TABLE schema_migrations ADD COLUMN checksum text;

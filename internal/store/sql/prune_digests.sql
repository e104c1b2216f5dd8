-- name: prune_digests :exec
-- params: before timestamptz
-- Deletes the digests recorded before @before (the delivered-history
-- retention) whose members are gone; a digest with an open or dead
-- member stays, so a lookup still names it.
DELETE FROM {schema}.digests d
WHERE d.created < @before
  AND NOT EXISTS (SELECT 1 FROM {schema}.messages m WHERE m.digest_id = d.id)

-- name: destination_park :execrows
-- params: id text
-- Parks the waiting rows of destination $1 that are not parked yet (due
-- at infinity, as destination_set_enabled.sql parks them when disabling):
-- a row that was in flight when the destination was disabled, or that a
-- producer published as the destination was being disabled. Only while
-- the destination is disabled, read under a share lock: an enable
-- waiting for it (it locks the destination first) moves the rows again
-- afterwards, and one that committed first leaves nothing parked. Rows in
-- flight stay as they are; the sink asks again when one comes back.
-- Returns how many rows it parked.
WITH d AS (
    SELECT id FROM {schema}.destinations WHERE id = $1 AND NOT enabled FOR SHARE
)
UPDATE {schema}.messages m SET available_at = 'infinity', updated_at = now()
WHERE (m.headers->>'outboxd-destination') = $1 AND m.phase = 'open' AND m.headers ? 'outboxd-destination'
  AND m.status <> 'in_progress' AND m.available_at <> 'infinity' AND EXISTS (SELECT FROM d)

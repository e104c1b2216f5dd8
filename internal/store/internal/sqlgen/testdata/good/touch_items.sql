-- name: touch_items :execrows
-- params: ids, at
-- Marks items $1 as seen at $2.
UPDATE {schema}.items SET seen_at = $2::timestamptz WHERE id = ANY($1::bigint[])

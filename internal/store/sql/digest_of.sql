-- name: digest_of :one
-- params: id bigint
-- returns: digest_id bigint, delivery_id text, key text, created timestamptz, sent_at timestamptz null, siblings bigint[]
-- The digest the row $1 last went out in (migration 018), open, dead or
-- delivered, and its other members, in id order; no row when it was in
-- none.
WITH row AS (
    SELECT digest_id FROM {schema}.messages WHERE id = $1 AND digest_id IS NOT NULL
    UNION ALL
    SELECT digest_id FROM {schema}.messages_history WHERE id = $1 AND digest_id IS NOT NULL
    LIMIT 1
)
SELECT d.id, d.delivery_id, d.key, d.created, d.sent_at,
       ARRAY(SELECT id FROM (SELECT id FROM {schema}.messages WHERE digest_id = d.id
                             UNION ALL SELECT id FROM {schema}.messages_history WHERE digest_id = d.id) s
             WHERE id <> $1 ORDER BY id)
FROM {schema}.digests d WHERE d.id = (SELECT digest_id FROM row)

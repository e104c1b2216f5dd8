-- name: search_items :many
-- mode: cache_describe
-- capacity: limit
-- params: before null, tags as []string
-- returns: id bigint, name text, tags text[], seen_at timestamptz null
-- returns: meta jsonb as map[string]string
-- Items of @owner, newest first, below the cursor @before (NULL: the
-- newest) and with any of @tags; ':not_a_param' and "@neither" stay as
-- they are, and so do /* @comments */ and $$ @quoted $$.
SELECT id, name, tags, seen_at, meta
FROM {schema}.items
WHERE owner = @owner::text AND (@before::bigint IS NULL OR id < @before)
  AND tags && @tags::text[] AND note <> '@not_a_param' AND "@col" IS NOT NULL
  AND body <> $$ @quoted $$ AND tags <@ tags
ORDER BY id DESC
LIMIT @limit::integer

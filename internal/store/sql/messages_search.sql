-- name: messages_search :many
-- mode: cache_describe
-- params: sink text, status text, dedup_key text, created_from null, created_before null, before null, limit bigint as int
-- returns: id bigint, sink text, dedup_key text, status text, attempts integer as int, created_at timestamptz
-- returns: updated_at timestamptz, sent_at timestamptz null, last_error text
-- A page of messages, newest first: at most @limit rows with ids below @before (the
-- cursor; NULL starts at the newest), of sink @sink, status @status and dedup key
-- @dedup_key unless those are '', created in [@created_from, @created_before) unless those are NULL.
-- Run as a statement planned with its values (core's oneShot), so the
-- tests on '' and NULL fold away: a (sink, dedup key) probes the unique
-- index; a status also names its phase, so dead walks its partial index
-- and the others the open one; the rest walk the primary key backwards
-- from the cursor, stopping after @limit matches. A time range is a filter
-- on that walk (ids follow created_at closely). Delivered rows are in
-- messages_history (migration 013; sent rows stored before it wait in
-- messages until maintenance moves them): its part walks the partitions'
-- id indexes backwards, merged, and finds a dedup key through its key.
-- No part is read for a status it cannot hold.
SELECT id, sink, dedup_key, status, attempts, created_at, updated_at, sent_at, last_error FROM (
    (SELECT id, sink, dedup_key, status, attempts, created_at, updated_at, sent_at, COALESCE(last_error, '') AS last_error
     FROM {schema}.messages
     WHERE (@sink = '' OR sink = @sink) AND (@dedup_key = '' OR dedup_key = @dedup_key)
       AND (@status = '' OR (status = @status AND phase = CASE WHEN @status IN ('sent', 'dead') THEN @status ELSE 'open' END))
       AND (@created_from::timestamptz IS NULL OR created_at >= @created_from) AND (@created_before::timestamptz IS NULL OR created_at < @created_before)
       AND (@before::bigint IS NULL OR id < @before)
     ORDER BY id DESC
     LIMIT @limit)
    UNION ALL
    (SELECT id, sink, dedup_key, 'sent', attempts, created_at, updated_at, sent_at, COALESCE(last_error, '')
     FROM {schema}.messages_history
     WHERE @status IN ('', 'sent') AND (@sink = '' OR sink = @sink)
       AND (@dedup_key = '' OR id IN (SELECT k.id FROM {schema}.message_keys k
                                      WHERE k.dedup_key = @dedup_key AND (@sink = '' OR k.sink = @sink)))
       AND (@created_from::timestamptz IS NULL OR created_at >= @created_from) AND (@created_before::timestamptz IS NULL OR created_at < @created_before)
       AND (@before::bigint IS NULL OR id < @before)
     ORDER BY id DESC
     LIMIT @limit)
) page
ORDER BY id DESC
LIMIT @limit

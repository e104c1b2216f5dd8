-- name: destination_health :one
-- params: destination text, recent bigint as int
-- returns: breaker_opened_at timestamptz null, breaker_last_failure text null, breaker_last_failure_at timestamptz null
-- returns: retry_after_until timestamptz null, last_success timestamptz null
-- returns: last_failure timestamptz null, last_error text null
-- What a tenant's destination $1 looks like from the receiver's side, for
-- its health (destinations.Health): its open circuit breaker, if any (the
-- earliest of the sinks that deliver to it); when the receiver's
-- Retry-After holds its deliveries (the latest due time of its waiting rows
-- put off by one); its last delivered row and last failed attempt among
-- its $2 newest rows on each side (messages and messages_history, each
-- through its destination index, as destination_deliveries.sql walks them),
-- so the cost is bounded whatever the history holds. An answer with a
-- Retry-After refunds its attempt and records no failed attempt
-- (finish.sql): the row it put off, waiting, carries it (its last error,
-- and its last attempt's start), so a paused destination shows the answer
-- that paused it.
WITH recent AS (
    (SELECT m.id, m.status, m.sent_at, m.available_at, m.deferrals,
            m.last_error, coalesce((m.last_attempt->>'started_at')::timestamptz, m.updated_at) AS attempted_at
     FROM {schema}.messages m
     WHERE (m.headers->>'outboxd-destination') = $1 AND m.headers ? 'outboxd-destination'
     ORDER BY m.id DESC
     LIMIT $2)
    UNION ALL
    (SELECT h.id, 'sent', h.sent_at, NULL::timestamptz, 0, NULL, NULL
     FROM {schema}.messages_history h
     WHERE (h.headers->>'outboxd-destination') = $1 AND h.headers ? 'outboxd-destination'
     ORDER BY h.id DESC
     LIMIT $2)
), breaker AS (
    SELECT b.opened_at, b.last_failure, b.last_failure_at
    FROM {schema}.destination_breakers b
    WHERE b.dest_key = $1
    ORDER BY b.opened_at
    LIMIT 1
), failure AS (
    SELECT f.failed_at, f.error
    FROM ((SELECT a.failed_at, a.error
           FROM {schema}.failed_attempts a
           WHERE a.message_id IN (SELECT r.id FROM recent r))
          UNION ALL
          (SELECT r.attempted_at, r.last_error
           FROM recent r
           WHERE r.status IN ('pending', 'failed') AND r.deferrals > 0 AND r.last_error IS NOT NULL)) f
    ORDER BY f.failed_at DESC
    LIMIT 1
)
SELECT (SELECT b.opened_at FROM breaker b), (SELECT b.last_failure FROM breaker b), (SELECT b.last_failure_at FROM breaker b),
       (SELECT max(r.available_at) FROM recent r
        WHERE r.status IN ('pending', 'failed') AND r.deferrals > 0 AND r.available_at > now() AND r.available_at < 'infinity'),
       (SELECT max(r.sent_at) FROM recent r WHERE r.status = 'sent'),
       (SELECT f.failed_at FROM failure f), (SELECT f.error FROM failure f)

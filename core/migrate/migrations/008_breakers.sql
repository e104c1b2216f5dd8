-- Circuit breakers per destination (a sink, or one destination key of a
-- sink with rate_limit.per_key). A row means the breaker is open: the
-- destination looked unwell (connections refused, timeouts, 502/503/504,
-- repeated Retry-After, a high share of 5xx), so no relay claims its rows
-- (claim.sql skips a sink whose breaker is open, the keyed dispatch hands
-- a key's rows back) and, once per probe interval, exactly one relay takes
-- the probe (probing_until) and delivers one real row. Its success deletes
-- the row: the breaker is closed. No row means closed, so a healthy
-- cluster keeps this table empty and the claim's check of it costs an
-- index probe of an empty table.
CREATE TABLE destination_breakers (
    sink            text        NOT NULL,
    -- '' for the sink as a whole.
    dest_key        text        NOT NULL DEFAULT '',
    opened_at       timestamptz NOT NULL DEFAULT now(),
    -- Why it opened, and the last failure seen (the opening one, then each
    -- failed probe's).
    reason          text        NOT NULL,
    last_failure    text        NOT NULL,
    last_failure_at timestamptz NOT NULL DEFAULT now(),
    -- The wait before the next probe; each probe doubles it, up to the
    -- sink's max_probe_interval.
    probe_interval  interval    NOT NULL,
    next_probe_at   timestamptz NOT NULL,
    -- Set while a relay delivers the probe (its lease).
    probing_until   timestamptz,
    probes          bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (sink, dest_key)
);

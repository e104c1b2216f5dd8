-- What the operator console and the metrics read instead of scanning the
-- messages table, and the bookkeeping of sinks paused by hand.

-- Pauses by hand. paused_until stays the one column every relay and the
-- claim statement obey (a Retry-After sets it too); manual_until remembers
-- the end the operator asked for, so a pause by hand can be told from a
-- receiver's Retry-After that outlasts it. until_resumed marks a pause
-- with no end (paused_until is then far ahead, so every reader keeps
-- working with finite times). changed_by, change_reason and changed_at
-- record the last pause or resume by hand: who, why and when.
ALTER TABLE sink_limits
    ADD COLUMN manual_until  timestamptz,
    ADD COLUMN until_resumed boolean NOT NULL DEFAULT false,
    ADD COLUMN changed_by    text,
    ADD COLUMN change_reason text,
    ADD COLUMN changed_at    timestamptz;

-- The cluster's row counts per sink, recomputed every few seconds by one
-- relay (the one holding sink_stats_lead) from the partial indexes and the
-- last hour of the sent index. Everyone else (other relays' gauges, the
-- console, any number of browsers) reads these few rows.
CREATE TABLE sink_stats (
    sink              text PRIMARY KEY,
    pending           bigint      NOT NULL,
    in_progress       bigint      NOT NULL,
    failed            bigint      NOT NULL,
    dead              bigint      NOT NULL,
    sent_last_hour    bigint      NOT NULL,
    -- created_at of the oldest row waiting for delivery (pending or failed).
    oldest_waiting_at timestamptz
);

-- Which relay computes sink_stats, and when it last did. A relay keeps
-- the lead by renewing it (taken_at) each round; another takes over once
-- it has not been renewed for a few rounds (its relay stopped). One row
-- at most.
CREATE TABLE sink_stats_lead (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    taken_by    text        NOT NULL,
    taken_at    timestamptz NOT NULL,
    computed_at timestamptz
);

-- Deliveries per sink and minute, added to by every relay every few
-- seconds (one statement per relay per flush) and pruned by maintenance:
-- delivery rates and latency percentiles without reading sent rows.
-- latency_buckets counts the sent deliveries whose time in the sink fell
-- in each bucket (the bounds are core's latencyBucketBounds, plus one
-- bucket for anything slower).
CREATE TABLE delivery_minutes (
    sink            text        NOT NULL,
    minute          timestamptz NOT NULL,
    sent            bigint      NOT NULL DEFAULT 0,
    retried         bigint      NOT NULL DEFAULT 0,
    dead            bigint      NOT NULL DEFAULT 0,
    latency_buckets bigint[]    NOT NULL,
    PRIMARY KEY (sink, minute)
);
CREATE INDEX delivery_minutes_minute_idx ON delivery_minutes (minute);

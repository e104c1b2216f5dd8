-- Deliveries per tenant's destination and minute (issue 45 item 5): the
-- figures a tenant's portal shows for the last 24 hours (delivered,
-- failed, p50/p99 latency). delivery_minutes counts per sink only and is
-- kept an hour; this table is added to by the same flush of each relay's
-- counts (one statement more per flush, none per delivery) and kept a
-- day and an hour by maintenance. latency_buckets is laid out as
-- delivery_minutes' (core's latency bucket bounds, plus one bucket for
-- anything slower).
CREATE TABLE destination_minutes (
    destination     text        NOT NULL,
    minute          timestamptz NOT NULL,
    sent            bigint      NOT NULL DEFAULT 0,
    retried         bigint      NOT NULL DEFAULT 0,
    dead            bigint      NOT NULL DEFAULT 0,
    latency_buckets bigint[]    NOT NULL,
    PRIMARY KEY (destination, minute)
);
CREATE INDEX destination_minutes_minute_idx ON destination_minutes (minute);

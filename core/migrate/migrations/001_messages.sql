-- The outbox itself. Rows are written by producers (Enqueue) and moved
-- through pending -> in_progress -> sent | failed | dead by relays.
CREATE TABLE messages (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sink             text        NOT NULL,
    dedup_key        text        NOT NULL,
    payload          jsonb       NOT NULL,
    headers          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    ordering_key     text,
    status           text        NOT NULL DEFAULT 'pending'
        CONSTRAINT messages_status_check
        CHECK (status IN ('pending', 'in_progress', 'sent', 'failed', 'dead')),
    attempts         int         NOT NULL DEFAULT 0,
    -- NULL means "the sink's configured max_attempts".
    max_attempts     int         CHECK (max_attempts > 0),
    available_at     timestamptz NOT NULL DEFAULT now(),
    lease_token      uuid,
    lease_expires_at timestamptz,
    last_error       text,
    -- What the destination returned for the delivery (Slack channel and ts...).
    receipt          jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    sent_at          timestamptz,
    -- A lease token exists exactly while a relay holds the row, so the
    -- terminal write's token guard implies status = 'in_progress'.
    CONSTRAINT messages_lease_check CHECK ((status = 'in_progress') = (lease_token IS NOT NULL)),
    CONSTRAINT messages_sink_dedup_key_key UNIQUE (sink, dedup_key)
);

-- The claim reads ready rows in available_at order. The predicate is the
-- claim's own status test, word for word, so the planner can use this index
-- and never touches delivered history (sent and dead rows are not in it).
CREATE INDEX messages_claimable_idx ON messages (available_at, id)
    WHERE status IN ('pending', 'failed');

-- Expired leases (a relay died mid-delivery) are found through this one.
CREATE INDEX messages_lease_idx ON messages (lease_expires_at)
    WHERE status = 'in_progress';

-- Per-key ordering: "is there an earlier unfinished row with my key?"
CREATE INDEX messages_ordering_idx ON messages (ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status IN ('pending', 'in_progress', 'failed');

-- Retention deletes old sent rows; operators list dead letters.
CREATE INDEX messages_sent_idx ON messages (sent_at) WHERE status = 'sent';
CREATE INDEX messages_dead_idx ON messages (sink, id) WHERE status = 'dead';

-- One row per failed attempt, so an operator can see why a message died.
-- The success path writes nothing here.
CREATE TABLE failed_attempts (
    message_id bigint      NOT NULL,
    attempt    int         NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT now(),
    error      text        NOT NULL
);
-- Not unique: a redriven message starts counting attempts again.
CREATE INDEX failed_attempts_message_idx ON failed_attempts (message_id, attempt);

-- Cluster-wide rate limits: one GCRA row per sink. tat is the theoretical
-- arrival time of the next permit; paused_until is set by a sink's
-- Retry-After and stops every relay from delivering to that sink.
CREATE TABLE sink_limits (
    sink         text PRIMARY KEY,
    tat          timestamptz NOT NULL DEFAULT now(),
    paused_until timestamptz
);

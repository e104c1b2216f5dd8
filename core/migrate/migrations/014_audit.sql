-- The audit trail: one row per operator action (a pause, a resume, which
-- closes the sink's circuit breakers, a forgotten pause, a redrive, a
-- purge, routes applied, migrations applied), written in the transaction
-- of the action itself, so an action that rolls back leaves no row and no
-- action commits without its row. Dry runs and refused requests change
-- nothing and are not recorded. The relays' maintenance deletes rows older
-- than retention.sent, as it does delivered messages.
CREATE TABLE audit_log (
    id     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at     timestamptz NOT NULL DEFAULT now(),
    -- Who: a token's name, the user an authenticating proxy named, or
    -- $USER@host for the command line; the role they acted with; and
    -- where from: the client's address, or "cli".
    actor  text        NOT NULL,
    role   text        NOT NULL,
    source text        NOT NULL,
    -- What: pause, resume, forget, redrive, purge, routes_apply or
    -- migrate; the sink it concerned ('' for none); the selection it acted
    -- on (dead letters' ids or filters) and how many things it changed.
    action text        NOT NULL,
    sink   text        NOT NULL DEFAULT '',
    filter jsonb,
    count  bigint      NOT NULL DEFAULT 0,
    -- The rest: a pause's end and reason, the breakers a resume closed,
    -- the versions migrate applied.
    detail jsonb
);

-- Listing (newest first, since a time) and pruning (oldest first) read it.
CREATE INDEX audit_log_at ON audit_log (at);

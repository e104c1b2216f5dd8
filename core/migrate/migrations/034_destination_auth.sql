-- Endpoint authentication (issue 45 item 2, docs/destinations.md
-- "Endpoint authentication"): what a destination's requests carry besides
-- the Standard Webhooks signature, chosen by its tenant: headers (an API
-- key its gateway checks), OAuth2 client credentials, a TLS client
-- certificate. One row per destination that has any.
--
-- sealed is the whole of it (header values, the client secret, the
-- private key), encrypted with AES-GCM by package destinations under the
-- key named key_id, as destination_secrets are: a dump of the database
-- alone does not reveal it. shown is what may be shown of it, written by
-- the same change: header names, the token URL redacted, the client id and
-- scopes, the certificate's subject and expiry; never a value.
--
-- A change of it updates its destination's row in the same transaction,
-- so the destination's revision moves and relays read it again.
CREATE TABLE destination_auth (
    destination_id text  PRIMARY KEY REFERENCES destinations ON DELETE CASCADE,
    key_id         text  NOT NULL,
    sealed         bytea NOT NULL,
    shown          jsonb NOT NULL CHECK (jsonb_typeof(shown) = 'object')
);
-- outboxd destinations rekey finds what is sealed under another key.
CREATE INDEX destination_auth_key_idx ON destination_auth (key_id);

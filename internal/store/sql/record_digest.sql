-- name: record_digest :one
-- params: sink text, key text, delivery_prefix text, ids bigint[], token uuid
-- returns: id bigint, delivery_id text, members bigint[]
-- Records a digest of sink @sink and digest key @key before it is sent
-- (migration 018), and marks its members, the rows @ids this relay holds
-- under lease token @token, with its id, in one statement. Its delivery
-- id is @delivery_prefix followed by its id. Returns the digest and the
-- members marked: a row whose lease this relay lost is not one. The
-- digest's holder (migration 029) is @token: no other relay takes it
-- while its members are in progress under it (claim_digest_members.sql),
-- and no row joins it later: its members are fixed here.
--
-- The commit waits for the WAL flush even on the relay's asynchronous
-- connections, as a claim's does (see claim.sql): a digest that may have
-- been sent must not be forgotten, or its members would be grouped anew
-- under another delivery id and a receiver could not tell the repeat.
WITH n AS (
    SELECT nextval('{schema}.digests_id_seq') AS id
    WHERE (SELECT current_setting('synchronous_commit') <> 'off' OR set_config('synchronous_commit', 'on', true) = 'on')
), d AS (
    INSERT INTO {schema}.digests (id, sink, key, delivery_id, holder)
    OVERRIDING SYSTEM VALUE
    SELECT n.id, @sink, @key, @delivery_prefix || n.id, @token FROM n
    RETURNING id, delivery_id
), marked AS (
    UPDATE {schema}.messages m SET digest_id = (SELECT id FROM d)
    WHERE m.id = ANY(@ids::bigint[]) AND m.lease_token = @token
    RETURNING m.id
)
SELECT d.id, d.delivery_id, ARRAY(SELECT id FROM marked ORDER BY id) FROM d

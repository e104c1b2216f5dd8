-- enqueue() holds the sink name to the dedup key's rules, as Go's Enqueue
-- does (core/message.go checkKey): at most 255 bytes and printable. The
-- sink is a key of the row's unique index; an over-long one used to fail
-- the producer's transaction with SQLSTATE 54000 (an index row too large)
-- and a control character in it stored a row no configured sink could
-- name. Both are now refused with 22023 and Enqueue's wording ("sink is
-- 300 bytes, over the limit of 255"). Only the sink joins the loop over
-- the keys; the rest is migration 002's definition.

CREATE OR REPLACE FUNCTION enqueue(
    sink         text,
    dedup_key    text,
    payload      jsonb,
    ordering_key text        DEFAULT NULL,
    headers      jsonb       DEFAULT NULL,
    available_at timestamptz DEFAULT NULL,
    max_attempts int         DEFAULT NULL,
    OUT id       bigint,
    OUT created  boolean
)
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    -- core.DefaultMaxPayloadBytes and core.MaxDedupKeyBytes.
    max_payload_bytes CONSTANT int := 262144;
    max_key_bytes     CONSTANT int := 255;
    -- Go's validation caps a message's max_attempts here.
    max_attempts_cap  CONSTANT int := 1073741824;
    -- What unicode.IsPrint rejects among assigned code points (Unicode 15):
    -- controls, format characters, private use, every space but U+0020,
    -- and U+FFFD, which Go reads as a byte that was not valid UTF-8.
    non_printable CONSTANT text := '[\u0001-\u001f\u007f-\u00a0\u00ad\u0600-\u0605\u061c\u06dd\u070f'
        '\u0890-\u0891\u08e2\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000'
        '\ue000-\uf8ff\ufeff\ufff9-\ufffb\ufffd\U000110bd\U000110cd\U00013430-\U0001343f'
        '\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f'
        '\U000f0000-\U000ffffd\U00100000-\U0010fffd]';
    prefix CONSTANT text := 'outbox: invalid message: ';
    payload_bytes int;
    key record;
BEGIN
    FOR key IN SELECT * FROM (VALUES ('sink', enqueue.sink), ('dedup key', enqueue.dedup_key), ('ordering key', enqueue.ordering_key)) AS k(what, value)
    LOOP
        CONTINUE WHEN key.what = 'ordering key' AND coalesce(key.value, '') = '';
        IF coalesce(key.value, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || key.what || ' is empty';
        END IF;
        IF octet_length(key.value) > max_key_bytes THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s is %s bytes, over the limit of %s', prefix, key.what, octet_length(key.value), max_key_bytes);
        END IF;
        IF key.value ~ non_printable THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('%s%s %s holds a character that is not printable', prefix, key.what, to_json(key.value));
        END IF;
    END LOOP;
    IF enqueue.max_attempts < 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%smax attempts must not be negative, got %s', prefix, enqueue.max_attempts);
    END IF;
    IF enqueue.payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = prefix || 'payload is empty';
    END IF;
    payload_bytes := octet_length(enqueue.payload::text);
    IF payload_bytes > max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('%spayload is %s bytes, over the limit of %s', prefix, payload_bytes, max_payload_bytes);
    END IF;
    IF enqueue.headers IS NOT NULL AND (jsonb_typeof(enqueue.headers) <> 'object' OR EXISTS (
        SELECT FROM jsonb_each(enqueue.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = prefix || 'headers must be a JSON object of strings';
    END IF;

    -- Insert, or find the row that holds the key. The lookup is a statement
    -- of its own so that, under READ COMMITTED, it sees a row a concurrent
    -- transaction committed after the insert's snapshot; if that row is
    -- deleted in between (retention), the loop inserts again.
    LOOP
        INSERT INTO messages (sink, dedup_key, payload, headers, ordering_key, max_attempts, available_at)
        VALUES (enqueue.sink, enqueue.dedup_key, enqueue.payload, coalesce(enqueue.headers, '{}'),
                nullif(enqueue.ordering_key, ''), CASE WHEN enqueue.max_attempts > 0 THEN least(enqueue.max_attempts, max_attempts_cap) END,
                coalesce(enqueue.available_at, now()))
        ON CONFLICT (sink, dedup_key) DO NOTHING
        RETURNING messages.id INTO enqueue.id;
        IF FOUND THEN
            created := true;
            -- wake() (migration 006) notifies a relay waiting for this
            -- sink's rows, if any; it hears it on commit.
            PERFORM wake(enqueue.sink);
            RETURN;
        END IF;
        SELECT m.id INTO enqueue.id FROM messages m
        WHERE m.sink = enqueue.sink AND m.dedup_key = enqueue.dedup_key;
        IF FOUND THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
END
$fn$;

-- Destinations' event patterns are matched segment by segment, in
-- bounded linear time, instead of as regular expressions (issue 41).
--
-- Migration 016 stored each pattern as a regular expression too
-- (destinations.patterns) and fan_out_destinations() matched it inside
-- the producer's transaction. A tenant's pattern is an outsider's data:
-- "**." repeated a few thousand times made every publish for that tenant
-- fail ("regular expression is too complex", SQLSTATE 2201B), rolling
-- back the producer's whole transaction (its own rows and other tenants'
-- events with it), and a thousand "**" made each publish run into the
-- statement timeout. Now:
--
--  - event_patterns_match() splits pattern and type on '.' and walks them
--    with two cursors, "*" taking one segment and "**" any number: when
--    a segment does not match, the cursors go back to just after the last
--    "**", which then takes one more segment of the type. Its work is at
--    most the pattern's segments times the type's, whatever the pattern.
--  - A pattern over event_pattern_bounds() (package destinations checks
--    the same bounds before storing one, MaxPatternBytes and
--    MaxPatternSegments, and a test holds the two together), and a
--    destination with more patterns than max_patterns, match nothing:
--    rows stored before the bounds existed, or written past the API,
--    cost a publish no more than a pattern at the bounds and never fail
--    it.
--  - Nothing here raises: a NULL pattern, an empty one or one of any
--    characters simply does not match.
--
-- The regular expressions are gone (the patterns column and the index
-- that carried it); the index keeps enabled only, since a tenant's
-- patterns may not fit in an index row, and the fan-out reads them from
-- the heap, a tenant's few rows.

-- event_pattern_bounds(): the bounds of what fan_out_destinations()
-- matches; package destinations declares the same (pattern.go, model.go).
CREATE FUNCTION event_pattern_bounds(OUT max_bytes int, OUT max_segments int, OUT max_patterns int)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $fn$
    SELECT 256, 16, 100
$fn$;

-- event_patterns_match(): whether a destination subscribed to patterns
-- takes event type type, within the bounds given (event_pattern_bounds()'s,
-- passed in so that no statement runs per call): none (NULL or empty)
-- takes every type, more than max_patterns takes none, otherwise any one
-- pattern within max_bytes and max_segments that matches. The type is
-- split once; a pattern without a wildcard is compared whole.
CREATE FUNCTION event_patterns_match(patterns text[], type text, max_bytes int, max_segments int, max_patterns int)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $fn$
DECLARE
    pattern text;
    p       text[];
    t       text[] := string_to_array(type, '.');
    m       int;
    n       int := cardinality(t);
    i       int;     -- the pattern's cursor
    j       int;     -- the type's cursor
    star    int;     -- the last "**" passed, 0 before any
    mark    int;     -- the type's segment that "**" stopped before
BEGIN
    IF coalesce(cardinality(patterns), 0) = 0 THEN
        RETURN true;
    END IF;
    IF type IS NULL OR cardinality(patterns) > max_patterns THEN
        RETURN false;
    END IF;
    FOREACH pattern IN ARRAY patterns LOOP
        CONTINUE WHEN pattern IS NULL OR octet_length(pattern) > max_bytes;
        IF strpos(pattern, '*') = 0 THEN
            IF pattern = type AND cardinality(string_to_array(pattern, '.')) <= max_segments THEN
                RETURN true;
            END IF;
            CONTINUE;
        END IF;
        p := string_to_array(pattern, '.');
        m := cardinality(p);
        CONTINUE WHEN m > max_segments;
        i := 1; j := 1; star := 0; mark := 0;
        WHILE j <= n LOOP
            IF i <= m AND p[i] = '**' THEN
                star := i;
                mark := j;
                i := i + 1;
            ELSIF i <= m AND (p[i] = '*' OR p[i] = t[j]) THEN
                i := i + 1;
                j := j + 1;
            ELSIF star > 0 THEN
                i := star + 1;
                mark := mark + 1;
                j := mark;
            ELSE
                EXIT;
            END IF;
        END LOOP;
        IF j > n THEN
            WHILE i <= m AND p[i] = '**' LOOP
                i := i + 1;
            END LOOP;
            IF i > m THEN
                RETURN true;
            END IF;
        END IF;
    END LOOP;
    RETURN false;
END
$fn$;

-- fan_out_destinations(), second definition (the first is migration
-- 016's): the destinations' events, as written, matched by segments.
CREATE OR REPLACE FUNCTION fan_out_destinations(tenant text, type text)
RETURNS TABLE (id text, enabled boolean)
LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $fn$
    SELECT d.id, d.enabled FROM destinations d, event_pattern_bounds() b
    WHERE d.tenant = fan_out_destinations.tenant
      AND event_patterns_match(d.events, type, b.max_bytes, b.max_segments, b.max_patterns)
$fn$;

DROP INDEX destinations_tenant_idx;
ALTER TABLE destinations DROP COLUMN patterns;
CREATE INDEX destinations_tenant_idx ON destinations (tenant, id) INCLUDE (enabled);

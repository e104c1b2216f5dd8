-- Publishes a batch of events in one statement, in the order of the arrays:
-- $1 types, $2 keys, $3 data, $4 ordering keys, $5 thread keys ('' for
-- none), and $6 the headers of them all (trace context, NULL for none).
-- Returns every target's row with the index (from 1) of its event, in
-- event order, then in each event's route order.
SELECT e.ord, p.sink, p.id, p.created
FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[])
    WITH ORDINALITY AS e(type, key, data, ordering_key, thread_key, ord)
CROSS JOIN LATERAL {schema}.publish(e.type, e.key, e.data, e.ordering_key, e.thread_key, $6::jsonb)
    WITH ORDINALITY AS p(sink, id, created, n)
ORDER BY e.ord, p.n

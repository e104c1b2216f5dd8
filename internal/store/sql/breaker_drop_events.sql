-- name: breaker_drop_events :exec
-- params: ids bigint[] as []int64, sink text
-- Deletes the rows publishing a breaker's event created for the unhealthy
-- sink $2 itself (ids $1): the news that a destination is down cannot go
-- to that destination, and must not wait there for its recovery.
DELETE FROM {schema}.messages WHERE id = ANY($1) AND sink = $2

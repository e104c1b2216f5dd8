-- The item with id $1: a short statement keeps $n parameters, named in
-- order by its params line.
-- name: item :one
-- params: id bigint
-- returns: name text
SELECT name FROM {schema}.items WHERE id = $1

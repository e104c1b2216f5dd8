-- name: reset :exec
-- A script of two statements: it takes no parameters.
DELETE FROM {schema}.items;
DELETE FROM {schema}.owners

-- name: destination_auth_shown :many
-- params: ids text[]
-- returns: destination_id text, shown jsonb as json.RawMessage
-- What may be shown of the authentication of destinations $1 (migration
-- 034), for the API's and the pages' answers: never a value.
SELECT destination_id, shown FROM {schema}.destination_auth WHERE destination_id = ANY($1)

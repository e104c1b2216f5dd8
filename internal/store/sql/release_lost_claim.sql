-- name: release_lost_claim :execrows
-- params: token uuid, sinks text[]
-- Hands back the rows of a claim whose answer the relay never got (its
-- connection was ended after the statement was sent: the claim may have
-- committed, leasing rows under @token that the relay does not know it
-- holds). Without this they would wait out their whole lease. Their lease
-- ends now and the claim's attempt is refunded: the relay delivered none
-- of them. They stay in_progress, so the next claim takes them as
-- reclaimed (Uncertain), which is never wrong: a sink then checks for an
-- earlier delivery that did not happen. Nothing matches when the claim
-- rolled back.
--
-- The rows are found among the open rows of the claim's sinks @sinks,
-- through the open index by its leading column (no index holds the lease
-- token): it reads the sinks' open rows once, and runs only after a lost
-- connection.
UPDATE {schema}.messages m
SET lease_expires_at = now(), attempts = m.attempts - 1
WHERE m.sink = ANY(@sinks::text[]) AND m.sink IS NOT NULL AND m.phase = 'open'
  AND m.status = 'in_progress' AND m.lease_token = @token

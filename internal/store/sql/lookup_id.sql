-- The id of the row stored under (sink $1, dedup key $2).
SELECT id FROM {schema}.messages WHERE sink = $1 AND dedup_key = $2

-- Serialises admission per scope key: a transaction lock on each key's
-- hash, taken in hash order so two claimers never wait on each other in a
-- circle. Held to the claim's commit, so the next claimer of the key
-- counts this one's claims. $1 the keys, each prefixed with the schema.
SELECT count(pg_advisory_xact_lock(h))
FROM (SELECT DISTINCT hashtextextended(k, 0) AS h FROM unnest($1::text[]) AS k ORDER BY 1) AS keys

-- Writes the cells a claim moved ($1 keys, $2 tats), in the transaction
-- that locked them (rate_cells_lock.sql) and claims the admitted items.
UPDATE rate_cells AS c
SET tat = m.tat
FROM unnest($1::text[], $2::timestamptz[]) AS m(key, tat)
WHERE c.tenant_id = '00000000-0000-0000-0000-000000000000' AND c.key = m.key

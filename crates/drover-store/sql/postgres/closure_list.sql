-- The closures ahead of the transaction's clock, by key; $1 one key or
-- NULL for all (the partial index rate_cells_closed holds only closures).
SELECT key, tat, closed_by, closed_by_item FROM rate_cells
WHERE tenant_id = '00000000-0000-0000-0000-000000000000'
  AND closed_by IS NOT NULL AND tat > now()
  AND ($1::text IS NULL OR key = $1)
ORDER BY key

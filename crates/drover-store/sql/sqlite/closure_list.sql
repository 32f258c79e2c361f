-- The closures ahead of the clock ?1 (micros), by key; ?2 one key or NULL
-- for all.
SELECT key, tat, closed_by, closed_by_item FROM rate_cells
WHERE closed_by IS NOT NULL AND tat > ?1 AND (?2 IS NULL OR key = ?2)
ORDER BY key

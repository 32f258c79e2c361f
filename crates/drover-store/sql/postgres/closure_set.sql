-- Closes a scope until $2: the closure's cell $1, its actor $3 and item
-- $4 (NULL: an operator). A handler's close ($4 not NULL) only moves a
-- closure in force later; an operator's sets it. Taking the cell's row
-- lock orders the close with every claim that locks the same cell
-- (rate_cells_lock.sql): a claim that locks it after this commits reads
-- the closure.
INSERT INTO rate_cells AS c (tenant_id, key, tat, closed_by, closed_by_item)
VALUES ('00000000-0000-0000-0000-000000000000', $1, $2, $3, $4)
ON CONFLICT (tenant_id, key) DO UPDATE
SET tat = excluded.tat, closed_by = excluded.closed_by, closed_by_item = excluded.closed_by_item
WHERE excluded.closed_by_item IS NULL
   OR c.closed_by IS NULL
   OR c.tat <= now()
   OR c.tat < excluded.tat

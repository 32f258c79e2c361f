-- Closes a scope until ?2 (micros): the closure's cell ?1, its actor ?3
-- and item ?4 (NULL: an operator). A handler's close (?4 not NULL) only
-- moves a closure in force (ahead of the clock ?5) later; an operator's
-- sets it.
INSERT INTO rate_cells (key, tat, closed_by, closed_by_item)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (key) DO UPDATE
SET tat = excluded.tat, closed_by = excluded.closed_by, closed_by_item = excluded.closed_by_item
WHERE excluded.closed_by_item IS NULL
   OR rate_cells.closed_by IS NULL
   OR rate_cells.tat <= ?5
   OR rate_cells.tat < excluded.tat

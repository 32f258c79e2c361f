-- Deletes up to $1 cells behind the clock (an idle cell is the same as
-- none). The clock is compared on the target row itself, so a cell a
-- claim locked and moved ahead meanwhile is re-checked on its new version
-- after that claim commits, and kept: a purge never resets a live cell.
DELETE FROM rate_cells AS c
WHERE c.tenant_id = '00000000-0000-0000-0000-000000000000'
  AND c.tat < now()
  AND c.key IN (
      SELECT i.key FROM rate_cells AS i
      WHERE i.tenant_id = '00000000-0000-0000-0000-000000000000' AND i.tat < now()
      LIMIT $1)

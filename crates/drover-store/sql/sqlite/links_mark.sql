-- Marks one item a linked enqueue names (a dependency, a batch member) as
-- linked and returns its status; no row: not an item of this tenant.
-- ?1 tenant_id, ?2 id.
UPDATE items SET linked = 1 WHERE tenant_id = ?1 AND id = ?2
RETURNING status

-- Whether the tenant holds an item with this id: tells NotFound from
-- Conflict on the error path of a fenced write. ?1 tenant_id, ?2 id.
SELECT EXISTS (SELECT 1 FROM items WHERE tenant_id = ?1 AND id = ?2)

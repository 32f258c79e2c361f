-- The rows of the items one item waits (or waited) for, with their
-- results. ?1 tenant, ?2 item.
SELECT i.* FROM items i
WHERE i.tenant_id = ?1
  AND i.id IN (SELECT dep_id FROM item_deps WHERE tenant_id = ?1 AND item_id = ?2)
ORDER BY i.id

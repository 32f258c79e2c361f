-- The earliest item enqueued before item ?1 (by rowid) in its group (tenant
-- ?2, kind ?3, group ?4) that keeps it waiting: pending, claimed, or failed
-- when ?5 (the group holds on a dead letter) is 1.
SELECT e.id, e.status
FROM items e INDEXED BY items_group_order
WHERE e.tenant_id = ?2
  AND e.kind = ?3
  AND e.group_key = ?4
  AND e.rowid < (SELECT rowid FROM items WHERE id = ?1)
  AND e.status IN ('pending', 'claimed', 'failed')
  AND (e.status <> 'failed' OR ?5 = 1)
ORDER BY e.rowid
LIMIT 1

-- park_pick.sql for an ordered group: beyond its first ?4 due pending
-- items in enqueue order (the rowid, through items_group_order, whose
-- terms are repeated so SQLite can use it), so its parked items are always
-- its last.
SELECT rowid AS rid
FROM items INDEXED BY items_group_order
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND group_key IS NOT NULL AND status IN ('pending', 'claimed', 'failed')
  AND status = 'pending'
  AND available_at <= ?6 AND available_at >= -24298790400000000
ORDER BY rowid
LIMIT ?5 OFFSET ?4

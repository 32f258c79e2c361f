-- The first ?4 pending items of group (?1 tenant, ?2 kind, ?3 group) in
-- its claim order (priority, available_at, rowid), each marked due
-- (claimable at ?5, micros: not parked, not ahead). Read through
-- items_group_next, so it stops after ?4 entries however deep the group
-- is. System operation.
SELECT available_at <= ?5 AS due
FROM items INDEXED BY items_group_next
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND status = 'pending' AND group_key IS NOT NULL
ORDER BY priority, available_at, rowid
LIMIT ?4

-- One tenant's items newest first, the other filters optional (NULL: no
-- filter). Its own statement so the planner walks items_tenant_created
-- instead of scanning every tenant's rows.
-- ?1 tenant_id, ?2 status, ?3 lane, ?4 kind, ?5 limit (-1: no limit).
SELECT * FROM items
WHERE tenant_id = ?1
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR lane = ?3)
  AND (?4 IS NULL OR kind = ?4)
ORDER BY created_at DESC, id DESC
LIMIT ?5

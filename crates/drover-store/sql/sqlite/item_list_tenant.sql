-- One tenant's items newest first, the other filters optional (NULL: no
-- filter). Its own statement so the planner walks items_tenant_created
-- instead of scanning every tenant's rows.
-- ?1 tenant_id, ?2 status, ?3 lane, ?4 kind, ?5 limit (-1: no limit),
-- ?6 idempotency key, ?7 created at or after, ?8 created
-- before (micros), ?9 text in last_error, ?10/?11 the cursor's
-- created_at and id (items after it in this order), ?12 group.
SELECT * FROM items
WHERE tenant_id = ?1
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR lane = ?3)
  AND (?4 IS NULL OR kind = ?4)
  AND (?6 IS NULL OR idempotency_key = ?6)
  AND (?7 IS NULL OR created_at >= ?7)
  AND (?8 IS NULL OR created_at < ?8)
  AND (?9 IS NULL OR instr(lower(last_error), lower(?9)) > 0)
  AND (?10 IS NULL OR created_at < ?10 OR (created_at = ?10 AND id < ?11))
  AND (?12 IS NULL OR group_key = ?12)
ORDER BY created_at DESC, id DESC
LIMIT ?5

-- Items newest first, each filter optional (NULL: no filter). Without a
-- tenant this is a system operation across tenants.
-- ?1 tenant_id, ?2 status, ?3 lane, ?4 kind, ?5 limit (-1: no limit).
SELECT * FROM items
WHERE (?1 IS NULL OR tenant_id = ?1)
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR lane = ?3)
  AND (?4 IS NULL OR kind = ?4)
ORDER BY created_at DESC, id DESC
LIMIT ?5

-- Records newest first; each filter is skipped when NULL.
-- ?1 tenant, ?2 status, ?3 kind, ?4 limit.
SELECT * FROM orchestrations
WHERE (?1 IS NULL OR tenant_id = ?1)
  AND (?2 IS NULL OR status = ?2)
  AND (?3 IS NULL OR kind = ?3)
ORDER BY created_at DESC, id DESC
LIMIT ?4

-- Items of every tenant newest first (system operation), each filter
-- optional (NULL: no filter).
-- ?1 status, ?2 lane, ?3 kind, ?4 limit (-1: no limit).
SELECT * FROM items
WHERE (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR lane = ?2)
  AND (?3 IS NULL OR kind = ?3)
ORDER BY created_at DESC, id DESC
LIMIT ?4

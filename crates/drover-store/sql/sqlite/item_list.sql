-- Items of every tenant newest first (system operation), each filter
-- optional (NULL: no filter).
-- ?1 status, ?2 lane, ?3 kind, ?4 limit (-1: no limit),
-- ?5 idempotency key, ?6 created at or after, ?7 created
-- before (micros), ?8 text in last_error, ?9/?10 the cursor's
-- created_at and id (items after it in this order), ?11 group.
SELECT * FROM items
WHERE (?1 IS NULL OR status = ?1)
  AND (?2 IS NULL OR lane = ?2)
  AND (?3 IS NULL OR kind = ?3)
  AND (?5 IS NULL OR idempotency_key = ?5)
  AND (?6 IS NULL OR created_at >= ?6)
  AND (?7 IS NULL OR created_at < ?7)
  AND (?8 IS NULL OR instr(lower(last_error), lower(?8)) > 0)
  AND (?9 IS NULL OR created_at < ?9 OR (created_at = ?9 AND id < ?10))
  AND (?11 IS NULL OR group_key = ?11)
ORDER BY created_at DESC, id DESC
LIMIT ?4

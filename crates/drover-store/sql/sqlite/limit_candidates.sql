-- One page of the limited claim's candidates: pending, available items of
-- lane ?1 (of the kinds ?3 as a JSON array; NULL: every kind) in claim
-- order. ?2 now (micros), ?4 page size, ?5 offset.
SELECT id, tenant_id, lane, kind, group_key
FROM items
WHERE status = 'pending'
  AND lane = ?1
  AND available_at <= ?2
  AND (?3 IS NULL OR kind IN (SELECT value FROM json_each(?3)))
ORDER BY priority, available_at
LIMIT ?4 OFFSET ?5

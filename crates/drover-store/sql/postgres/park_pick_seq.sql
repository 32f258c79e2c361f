-- park_pick.sql for an ordered group: beyond its first $4 due pending
-- items in enqueue order, so its parked items are always its last.
SELECT id
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at <= now() AND available_at >= '1200-01-02 00:00:00+00'
ORDER BY seq
OFFSET $4
LIMIT $5
FOR UPDATE SKIP LOCKED

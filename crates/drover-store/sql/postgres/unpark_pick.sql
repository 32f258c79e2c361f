-- The first $4 parked items of group ($1 tenant, $2 kind, $3 group) in
-- claim order (items_parked), locked without waiting. System role.
SELECT id
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
ORDER BY priority, available_at
LIMIT $4
FOR UPDATE SKIP LOCKED

-- unpark_pick.sql for an ordered group: in enqueue order (items_parked_seq).
SELECT id
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
ORDER BY seq
LIMIT $4
FOR UPDATE SKIP LOCKED

-- park_front.sql for an ordered group: its first $4 pending items in
-- enqueue order (items_group_order), each marked due when it is claimable
-- now. System role.
SELECT available_at <= now() AS due
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status = 'pending' AND group_key IS NOT NULL
ORDER BY seq
LIMIT $4

-- park_front.sql for an ordered group: its first $4 open items in enqueue
-- order (items_group_order), each marked due when it is pending and
-- claimable now. System role.
SELECT status = 'pending' AND available_at <= now() AS due
FROM items
WHERE tenant_id = $1 AND kind = $2 AND group_key = $3
  AND status IN ('pending', 'claimed', 'failed')
ORDER BY seq
LIMIT $4

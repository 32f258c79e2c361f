-- park_front.sql for an ordered group: its first ?4 pending items in
-- enqueue order (the rowid, through items_group_order, whose terms are
-- repeated so SQLite can use it), each marked due when claimable at ?5
-- (micros). Pending only, as park_front.sql: the claimed head of a full
-- ordered group (its limit is 1) and its dead letters are not part of the
-- backlog, and counted here they would keep a full group from ever
-- reading as deep. System operation.
SELECT available_at <= ?5 AS due
FROM items INDEXED BY items_group_order
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND group_key IS NOT NULL AND status IN ('pending', 'claimed', 'failed')
  AND status = 'pending'
ORDER BY rowid
LIMIT ?4

-- Subtracts from item_counts the rollup's count of one item (?1 tenant_id,
-- ?2 id) about to leave its final status (an operator's retry, in its
-- transaction): nothing if the row is not final or not folded in yet.
UPDATE item_counts SET n = n - 1
WHERE (lane, tenant_id, kind, status) = (
    SELECT lane, tenant_id, kind, status FROM items
    WHERE tenant_id = ?1 AND id = ?2
      AND status IN ('done', 'failed', 'cancelled')
      AND updated_at < (SELECT settled_to FROM item_counts_mark WHERE id = 1)
)

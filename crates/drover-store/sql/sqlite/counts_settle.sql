-- Folds the final rows updated in [mark, ?1) into item_counts (system
-- operation; in a write transaction, before counts_settle_mark.sql). ?1 is
-- a second before the transaction's clock reading (migration 0024).
INSERT INTO item_counts (lane, tenant_id, kind, status, n)
SELECT lane, tenant_id, kind, status, count(*)
FROM items INDEXED BY items_final_updated
WHERE status IN ('done', 'failed', 'cancelled')
  AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
  AND updated_at < ?1
GROUP BY lane, tenant_id, kind, status
ON CONFLICT (lane, tenant_id, kind, status) DO UPDATE SET n = n + excluded.n

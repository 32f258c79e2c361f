-- Folds the final rows of the settlement range, grouped once into
-- temp.settle_fine (settle_fine.sql), into item_counts (system operation;
-- in a write transaction, before counts_settle_mark.sql; migration 0024).
INSERT INTO item_counts (lane, tenant_id, kind, status, n)
SELECT lane, tenant_id, kind, status, sum(n)
FROM temp.settle_fine
WHERE true  -- an upsert after SELECT needs a WHERE (SQLite's parser)
GROUP BY lane, tenant_id, kind, status
ON CONFLICT (lane, tenant_id, kind, status) DO UPDATE SET n = n + excluded.n

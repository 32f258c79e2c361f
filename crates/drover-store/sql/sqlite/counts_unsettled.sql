-- How many final rows were updated in [mark, ?1): what counts_settle.sql
-- would fold in (migration 0024).
SELECT count(*)
FROM items INDEXED BY items_final_updated
WHERE status IN ('done', 'failed', 'cancelled')
  AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
  AND updated_at < ?1

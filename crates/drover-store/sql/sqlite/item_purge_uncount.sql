-- Subtracts from item_counts the rows of a purge batch (?1, a JSON array
-- of rowids) that the rollup had folded in (migration 0024).
UPDATE item_counts SET n = item_counts.n - gone.n
FROM (
    SELECT lane, tenant_id, kind, status, count(*) AS n
    FROM items
    WHERE rowid IN (SELECT value FROM json_each(?1))
      AND updated_at < (SELECT settled_to FROM item_counts_mark WHERE id = 1)
    GROUP BY lane, tenant_id, kind, status
) AS gone
WHERE item_counts.lane = gone.lane AND item_counts.tenant_id = gone.tenant_id
  AND item_counts.kind = gone.kind AND item_counts.status = gone.status

-- Items per lane, kind and status of one tenant (?1): counts.sql's parts,
-- each narrowed to the tenant (the rollup carries it; the pending, claimed
-- and unsettled final rows are read from the same indexes and filtered).
-- What a tenant-scoped overview shows.
SELECT lane, kind, status, sum(n) AS count
FROM (
    SELECT lane, kind, status, n FROM item_counts WHERE tenant_id = ?1
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_final_updated
    WHERE status IN ('done', 'failed', 'cancelled')
      AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
      AND tenant_id = ?1
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_pending
    WHERE status = 'pending' AND tenant_id = ?1
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_claimed_lease
    WHERE status = 'claimed' AND tenant_id = ?1
) AS all_lanes
GROUP BY lane, kind, status
HAVING sum(n) <> 0
ORDER BY lane, kind, status

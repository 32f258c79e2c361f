-- Items per lane, kind and status (system operation). Exact, in one
-- snapshot, and never a pass over the final rows (most of the table): the
-- parts of counts_lane.sql for every lane (migration 0024).
SELECT lane, kind, status, sum(n) AS count
FROM (
    SELECT lane, kind, status, n FROM item_counts
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_final_updated
    WHERE status IN ('done', 'failed', 'cancelled')
      AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_pending
    WHERE status = 'pending'
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_claimed_lease
    WHERE status = 'claimed'
) AS all_lanes
GROUP BY lane, kind, status
HAVING sum(n) <> 0
ORDER BY lane, kind, status

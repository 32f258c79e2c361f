-- Items of one lane (?1) per kind and status (system operation). Exact, in
-- one snapshot, and never the whole table (migration 0024):
--   final rows settled  the rollup item_counts;
--   final rows newer    a range of items_final_updated (updated at or after
--                       the mark: what the sweep has not folded in yet);
--   pending             items_pending (lane leads it);
--   claimed             items_claimed_lease (the claimed set is small,
--                       bounded by the workers' capacity).
SELECT lane, kind, status, sum(n) AS count
FROM (
    SELECT lane, kind, status, n FROM item_counts WHERE lane = ?1
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_final_updated
    WHERE status IN ('done', 'failed', 'cancelled')
      AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
      AND lane = ?1
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items WHERE lane = ?1 AND status = 'pending'
    UNION ALL
    SELECT lane, kind, status, 1 AS n FROM items INDEXED BY items_claimed_lease
    WHERE status = 'claimed' AND lane = ?1
) AS of_lane
GROUP BY lane, kind, status
HAVING sum(n) <> 0
ORDER BY lane, kind, status

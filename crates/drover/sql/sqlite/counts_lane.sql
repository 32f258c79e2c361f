-- Items of one lane (?1) per kind and status (system operation). Three
-- index scans, never the whole table: pending rows through items_pending
-- (lane leads it), claimed rows through items_claimed_lease (the claimed
-- set is small, bounded by the workers' capacity), final rows through
-- items_lane_status (final rows only, migration 0016).
SELECT lane, kind, status, count(*) AS count
FROM (
    SELECT lane, kind, status FROM items WHERE lane = ?1 AND status = 'pending'
    UNION ALL
    SELECT lane, kind, status FROM items INDEXED BY items_claimed_lease
    WHERE status = 'claimed' AND lane = ?1
    UNION ALL
    SELECT lane, kind, status FROM items
    WHERE lane = ?1 AND status IN ('done', 'failed', 'cancelled')
) AS of_lane
GROUP BY lane, kind, status
ORDER BY lane, kind, status

-- Items of one lane (?1) per kind and status (system operation). Two index
-- scans: pending rows through items_pending, the rest through
-- items_lane_status.
SELECT lane, kind, status, count(*) AS count
FROM (
    SELECT lane, kind, status FROM items WHERE lane = ?1 AND status = 'pending'
    UNION ALL
    SELECT lane, kind, status FROM items WHERE lane = ?1 AND status <> 'pending'
) AS of_lane
GROUP BY lane, kind, status
ORDER BY lane, kind, status

-- Items of one lane ($1) per kind and status. System role. Two index
-- scans, never the whole table: pending rows through items_claim, the rest
-- through items_lane_status (each branch's predicate matches its partial
-- index, which a single `lane = $1` could not).
SELECT lane, kind, status, count(*) AS count
FROM (
    SELECT lane, kind, status FROM items WHERE lane = $1 AND status = 'pending'
    UNION ALL
    SELECT lane, kind, status FROM items WHERE lane = $1 AND status <> 'pending'
) AS of_lane
GROUP BY lane, kind, status
ORDER BY lane, kind, status

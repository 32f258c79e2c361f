-- Per lane with pending items, the available_at of the oldest one that is
-- available at ?1 (NULL when every pending item is scheduled later).
SELECT lane, min(CASE WHEN available_at <= ?1 THEN available_at END) AS oldest
FROM items
WHERE status = 'pending'
GROUP BY lane
ORDER BY lane

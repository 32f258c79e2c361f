-- Items per lane, kind and status. System role.
SELECT lane, kind, status, count(*) AS count
FROM items
GROUP BY lane, kind, status
ORDER BY lane, kind, status

-- Items per lane, kind and status (system operation).
SELECT lane, kind, status, count(*) AS count FROM items
GROUP BY lane, kind, status
ORDER BY lane, kind, status

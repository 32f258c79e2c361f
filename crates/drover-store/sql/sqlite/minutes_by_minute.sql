-- The minutes rollup per minute since ?1 (µs), of tenant ?2 (NULL: every
-- tenant), oldest first (a range of the primary key).
SELECT minute, sum(done) AS done, sum(failed) AS failed,
       sum(latency_ms_sum) AS latency_ms_sum, max(latency_ms_max) AS latency_ms_max
FROM item_minutes
WHERE minute >= ?1 AND (?2 IS NULL OR tenant_id = ?2)
GROUP BY minute
ORDER BY minute

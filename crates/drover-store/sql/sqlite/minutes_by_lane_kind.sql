-- The minutes rollup per lane and kind since ?1 (µs), of tenant ?2 (NULL:
-- every tenant) (a range of the primary key).
SELECT lane, kind, sum(done) AS done, sum(failed) AS failed,
       sum(latency_ms_sum) AS latency_ms_sum, max(latency_ms_max) AS latency_ms_max
FROM item_minutes
WHERE minute >= ?1 AND (?2 IS NULL OR tenant_id = ?2)
GROUP BY lane, kind
ORDER BY lane, kind

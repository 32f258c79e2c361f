-- The minutes rollup per minute since $1, of tenant $2 (NULL: every
-- tenant), oldest first (system role; a range of the primary key).
SELECT minute, sum(done)::bigint AS done, sum(failed)::bigint AS failed,
       sum(latency_ms_sum)::bigint AS latency_ms_sum, max(latency_ms_max)::bigint AS latency_ms_max
FROM item_minutes
WHERE minute >= $1::timestamptz AND ($2::uuid IS NULL OR tenant_id = $2)
GROUP BY minute
ORDER BY minute

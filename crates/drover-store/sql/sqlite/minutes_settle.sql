-- Folds the done and failed groups of temp.settle_fine (settle_fine.sql)
-- into item_minutes (migration 0041), minutes from ?1 on only (the rollup
-- keeps no older minute; minutes_expire.sql drops them). In the
-- settlement's write transaction, before counts_settle_mark.sql moves the
-- mark. Times are microseconds.
INSERT INTO item_minutes (minute, tenant_id, lane, kind, done, failed, latency_ms_sum, latency_ms_max)
SELECT minute, tenant_id, lane, kind,
       sum(CASE WHEN status = 'done' THEN n ELSE 0 END),
       sum(CASE WHEN status = 'failed' THEN n ELSE 0 END),
       sum(ms_sum), max(ms_max)
FROM temp.settle_fine
WHERE status <> 'cancelled' AND minute >= ?1  -- minute 0: older rows
GROUP BY minute, tenant_id, lane, kind
ON CONFLICT (minute, tenant_id, lane, kind) DO UPDATE SET
    done = done + excluded.done,
    failed = failed + excluded.failed,
    latency_ms_sum = latency_ms_sum + excluded.latency_ms_sum,
    latency_ms_max = max(latency_ms_max, excluded.latency_ms_max)

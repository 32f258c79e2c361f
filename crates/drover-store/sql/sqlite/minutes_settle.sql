-- Folds the done and failed rows updated in [mark, ?1) into item_minutes
-- (migration 0041), per minute, tenant, lane and kind; rows older than ?2
-- are not folded (the rollup keeps no such minute). In the settlement's
-- write transaction, before counts_settle_mark.sql moves the mark. Times
-- are microseconds; latency is available_at to updated_at of the done
-- rows, in milliseconds.
INSERT INTO item_minutes (minute, tenant_id, lane, kind, done, failed, latency_ms_sum, latency_ms_max)
SELECT (updated_at / 60000000) * 60000000 AS m, tenant_id, lane, kind,
       sum(status = 'done'), sum(status = 'failed'),
       coalesce(sum(CASE WHEN status = 'done' THEN max(updated_at - available_at, 0) / 1000 END), 0),
       coalesce(max(CASE WHEN status = 'done' THEN max(updated_at - available_at, 0) / 1000 END), 0)
FROM items INDEXED BY items_final_updated
WHERE status IN ('done', 'failed', 'cancelled')  -- the index's own predicate
  AND status <> 'cancelled'
  AND updated_at >= max((SELECT settled_to FROM item_counts_mark WHERE id = 1), ?2)
  AND updated_at < ?1
GROUP BY m, tenant_id, lane, kind
ON CONFLICT (minute, tenant_id, lane, kind) DO UPDATE SET
    done = done + excluded.done,
    failed = failed + excluded.failed,
    latency_ms_sum = latency_ms_sum + excluded.latency_ms_sum,
    latency_ms_max = max(latency_ms_max, excluded.latency_ms_max)

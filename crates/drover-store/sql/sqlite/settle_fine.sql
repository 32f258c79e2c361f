-- Reads the final rows updated in [mark, ?1) once (migration 0024's range
-- of items_final_updated) into temp.settle_fine, grouped by minute, tenant,
-- lane, kind and status, with the done rows' available-to-done latency in
-- milliseconds (sum and max): what counts_settle.sql and
-- minutes_settle.sql fold. Rows updated before ?2 (older than the minutes
-- the rollup keeps) share minute 0, so catching up on an old table makes
-- no group per minute. In the settlement's write transaction. Times are
-- microseconds.
INSERT INTO temp.settle_fine (minute, tenant_id, lane, kind, status, n, ms_sum, ms_max)
SELECT CASE WHEN updated_at >= ?2 THEN (updated_at / 60000000) * 60000000 ELSE 0 END, tenant_id, lane, kind, status, count(*),
       coalesce(sum(CASE WHEN status = 'done' THEN max(updated_at - available_at, 0) / 1000 END), 0),
       coalesce(max(CASE WHEN status = 'done' THEN max(updated_at - available_at, 0) / 1000 END), 0)
FROM items INDEXED BY items_final_updated
WHERE status IN ('done', 'failed', 'cancelled')  -- the index's own predicate
  AND updated_at >= (SELECT settled_to FROM item_counts_mark WHERE id = 1)
  AND updated_at < ?1
GROUP BY 1, tenant_id, lane, kind, status

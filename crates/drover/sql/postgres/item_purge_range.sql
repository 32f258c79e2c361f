-- As item_purge.sql, within one child's window of ids [$3, $4) (pruned to
-- it): the fallback for a child past the retention that still holds more
-- rows than its drop may move (store/postgres/rotate.rs), so its final rows
-- still go while the others finish.
WITH mark AS (
    SELECT settled_to FROM item_counts_mark
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
    FOR SHARE
), gone AS (
    DELETE FROM items
    WHERE id >= $3 AND id < $4 AND id IN (
        SELECT id
        FROM items
        WHERE id >= $3 AND id < $4
          AND status IN ('done', 'failed', 'cancelled') AND updated_at < $1
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, tenant_id, lane, kind, status, updated_at, idempotency_key
), keys AS (
    DELETE FROM item_keys AS k
    USING gone
    WHERE gone.idempotency_key IS NOT NULL AND k.tenant_id = gone.tenant_id
      AND k.idempotency_key = gone.idempotency_key AND k.item_id = gone.id
    RETURNING 1
), per AS (
    SELECT tenant_id, lane, kind, status, count(*) AS n
    FROM gone
    WHERE updated_at < (SELECT settled_to FROM mark)
    GROUP BY tenant_id, lane, kind, status
), subtracted AS (
    UPDATE item_counts AS c
    SET n = c.n - per.n
    FROM per
    WHERE c.tenant_id = per.tenant_id AND c.lane = per.lane AND c.kind = per.kind
      AND c.status = per.status
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS purged, (SELECT count(*) FROM subtracted) AS groups

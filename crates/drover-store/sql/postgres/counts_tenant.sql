-- Items per lane, kind and status of one tenant ($2): counts.sql's parts,
-- each narrowed to the tenant (the rollup and its corrections carry the
-- tenant; the pending, claimed and unsettled final rows are read from the
-- same indexes and filtered). System role. What a tenant-scoped overview
-- shows. $1 is the mark as read just before (counts_mark.sql).
WITH mark AS (
    SELECT settled_to FROM item_counts_mark
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
), parts AS (
    SELECT lane, kind, status, n
    FROM item_counts
    WHERE tenant_id = $2
    UNION ALL
    SELECT lane, kind, status, -count(*)
    FROM item_counts_unfinal
    WHERE was_updated_at < (SELECT settled_to FROM mark)
      AND tenant_id = $2
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'done'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND tenant_id = $2
    GROUP BY lane, kind, status

    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'failed'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND tenant_id = $2
    GROUP BY lane, kind, status

    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'cancelled'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND tenant_id = $2
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'pending' AND tenant_id = $2
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'claimed' AND tenant_id = $2
    GROUP BY lane, kind, status
)
SELECT lane, kind, status, sum(n)::bigint AS count
FROM parts
GROUP BY lane, kind, status
HAVING sum(n) <> 0
ORDER BY lane, kind, status

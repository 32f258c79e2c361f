-- Items per lane, kind and status, of every lane ($2 NULL) or of one.
-- System role. Exact, in one snapshot, and never a pass over the whole
-- table (migration 0020):
--   final rows settled  the rollup item_counts, less the lines of
--                       item_counts_unfinal whose rows it counted;
--   final rows newer    an index range of items_final per status (updated
--                       at or after the mark: what the sweep has not folded
--                       in yet; one branch per status, so the status is the
--                       range's leading key: `status IN (...)` is the
--                       index's own predicate, and the planner would drop it
--                       and read the whole index for the updated_at range);
--   pending, claimed    their partial indexes (items_claim,
--                       items_tenant_stale): the backlog and the claims.
-- $1 is the mark as read just before (counts_mark.sql). It is there for
-- the planner, which sees the range's true size through it (run unprepared,
-- so planned with the value); the mark in this snapshot bounds the range
-- too, and since the mark only moves forward it is the tighter bound.
WITH mark AS (
    SELECT settled_to FROM item_counts_mark
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid
), parts AS (
    SELECT lane, kind, status, n
    FROM item_counts
    WHERE ($2::text IS NULL OR lane = $2)
    UNION ALL
    SELECT lane, kind, status, -count(*)
    FROM item_counts_unfinal
    WHERE was_updated_at < (SELECT settled_to FROM mark)
      AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'done'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status

    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'failed'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status

    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'cancelled'
      AND updated_at >= $1::timestamptz
      AND updated_at >= (SELECT settled_to FROM mark)
      AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'pending' AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status
    UNION ALL
    SELECT lane, kind, status, count(*)
    FROM items
    WHERE status = 'claimed' AND ($2::text IS NULL OR lane = $2)
    GROUP BY lane, kind, status
)
SELECT lane, kind, status, sum(n)::bigint AS count
FROM parts
GROUP BY lane, kind, status
HAVING sum(n) <> 0
ORDER BY lane, kind, status

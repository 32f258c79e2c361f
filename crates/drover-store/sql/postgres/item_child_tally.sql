-- What a child's drop removes ([$1, $2) of ids; final rows updated before
-- the cutoff $3), per count group, and how many of them the count rollup
-- had settled (updated before its mark $4): those leave item_counts.
SELECT tenant_id, lane, kind, status, count(*) AS n,
       count(*) FILTER (WHERE updated_at < $4::timestamptz) AS settled
FROM items
WHERE id >= $1 AND id < $2 AND status IN ('done', 'failed', 'cancelled')
  AND updated_at < $3::timestamptz
GROUP BY tenant_id, lane, kind, status

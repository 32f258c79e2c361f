-- One slice of a large child's tally (item_child_tally.sql over the child's
-- pages [$5, $6) only: a TID range scan), so the tally of a child of tens
-- of millions of rows goes in bounded statements across purge passes.
SELECT tenant_id, lane, kind, status, count(*) AS n,
       count(*) FILTER (WHERE updated_at < $4::timestamptz) AS settled
FROM items
WHERE id >= $1 AND id < $2 AND status IN ('done', 'failed', 'cancelled')
  AND updated_at < $3::timestamptz
  AND ctid >= ('(' || $5::bigint || ',0)')::tid
  AND ctid < ('(' || $6::bigint || ',0)')::tid
GROUP BY tenant_id, lane, kind, status

-- What holds and waits on the limits of lanes $1 and kinds $2: claimed
-- items and pending items available now, grouped by scope parts.
SELECT status, lane, kind, tenant_id, group_key, count(*) AS n
FROM items
WHERE status IN ('claimed', 'pending')
  AND (status = 'claimed' OR available_at <= now())
  AND (lane = ANY($1::text[]) OR kind = ANY($2::text[]))
GROUP BY status, lane, kind, tenant_id, group_key

-- What holds and waits on limits: claimed items, and pending items
-- available at ?1 (micros), grouped by scope parts.
SELECT status, lane, kind, tenant_id, group_key, count(*) AS n
FROM items
WHERE status = 'claimed' OR (status = 'pending' AND available_at <= ?1)
GROUP BY status, lane, kind, tenant_id, group_key

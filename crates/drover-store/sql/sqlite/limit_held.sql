-- The claims holding slots: the claimed items' scope parts, one row per
-- distinct (lane, kind, tenant, group) with how many hold it (the claimed
-- set is small: items_claimed_lease; a drain of one kind is one row).
SELECT lane, kind, tenant_id, group_key, count(*) AS n
FROM items
WHERE status = 'claimed'
GROUP BY lane, kind, tenant_id, group_key

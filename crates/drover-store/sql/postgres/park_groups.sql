-- The groups with parked items (tenant, kind, group), one descent of
-- items_parked per group (a loose scan of its leading columns). System role.
WITH RECURSIVE g AS (
    (SELECT tenant_id, kind, group_key FROM items
     WHERE status = 'pending' AND group_key IS NOT NULL
       AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
     ORDER BY tenant_id, kind, group_key LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.kind, n.group_key FROM g CROSS JOIN LATERAL (
        SELECT tenant_id, kind, group_key FROM items
        WHERE status = 'pending' AND group_key IS NOT NULL
          AND available_at >= '2200-01-01 00:00:00+00' AND available_at < '9000-01-01 00:00:00+00'
          AND (tenant_id, kind, group_key) > (g.tenant_id, g.kind, g.group_key)
        ORDER BY tenant_id, kind, group_key LIMIT 1) n
)
SELECT tenant_id, kind, group_key FROM g

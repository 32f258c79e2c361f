-- Each tenant's due items in each lane (due: available_at <= ?1), counted
-- up to ?2 (FAIR_WAITING_CAP) per lane and tenant; only the pairs with at
-- least one. The pairs come from a skip scan of items_fair (lane,
-- tenant_id, ...), one probe per pair starting past the last, and each
-- count stops at ?2: pairs x ?2 index entries at most, whatever the
-- backlog (the GROUP BY it replaces read every pending row).
WITH RECURSIVE pairs(lane, tenant_id) AS (
    SELECT lane, tenant_id FROM (
        SELECT lane, tenant_id FROM items WHERE status = 'pending'
        ORDER BY lane, tenant_id LIMIT 1)
    UNION ALL
    SELECT n.lane, n.tenant_id FROM pairs p JOIN items n ON n.rowid = (
        SELECT i.rowid FROM items i
        WHERE i.status = 'pending' AND (i.lane, i.tenant_id) > (p.lane, p.tenant_id)
        ORDER BY i.lane, i.tenant_id LIMIT 1)
)
SELECT lane, tenant_id, n FROM (
    SELECT p.lane, p.tenant_id, (
        SELECT count(*) FROM (
            SELECT 1 FROM items i
            WHERE i.status = 'pending' AND i.lane = p.lane AND i.tenant_id = p.tenant_id
              AND i.available_at <= ?1
            LIMIT ?2)) AS n
    FROM pairs p)
WHERE n > 0

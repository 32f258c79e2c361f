-- Each tenant's due items in each lane, counted up to $1 (FAIR_WAITING_CAP)
-- per lane and tenant; only the pairs with at least one. System role.
-- The pairs with pending rows come from a skip scan of items_fair (lane,
-- tenant_id, ...): one index probe per pair, each starting past the last.
-- Each pair's count stops at $1. So the read costs pairs x $1 index
-- entries at most, whatever the backlog: the GROUP BY it replaces read
-- every pending row (73 ms at 200,000 pending of 10,000,000 items, the
-- lanes page's and GET /v1/fairness's whole time).
WITH RECURSIVE pairs AS (
    (SELECT lane, tenant_id FROM items WHERE status = 'pending'
     ORDER BY lane, tenant_id LIMIT 1)
    UNION ALL
    SELECT n.lane, n.tenant_id FROM pairs p CROSS JOIN LATERAL (
        SELECT i.lane, i.tenant_id FROM items i
        WHERE i.status = 'pending' AND (i.lane, i.tenant_id) > (p.lane, p.tenant_id)
        ORDER BY i.lane, i.tenant_id LIMIT 1) n
)
SELECT p.lane, p.tenant_id, c.n FROM pairs p CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM items i
        WHERE i.status = 'pending' AND i.lane = p.lane AND i.tenant_id = p.tenant_id
          AND i.available_at <= now()
        LIMIT $1) d) c
WHERE c.n > 0

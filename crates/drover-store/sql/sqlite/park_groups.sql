-- The groups with parked items (tenant, kind, group), one descent of
-- items_parked_seq per group (a loose scan of its leading columns), so a
-- group's parked items are never walked. The next group after the last
-- one found is the first of: a later group of its tenant and kind, a
-- later kind of its tenant, a later tenant; each an index range of its
-- own (a row-value comparison would range over the tenant only and walk
-- the tenant's parked items). items_parked_seq, not items_parked: it has
-- no available_at column, so the parked range (written out as the
-- index's own terms, 2200-01-01 to 9000-01-01 in micros, so SQLite uses
-- it) cannot become a skip-scan constraint; with ANALYZE statistics of a
-- single tenant and kind, SQLite otherwise skip-scans items_parked whole
-- for each group (seconds for 300,000 parked items). System operation.
WITH RECURSIVE g(tenant_id, kind, group_key) AS (
    SELECT tenant_id, kind, group_key FROM (
        SELECT tenant_id, kind, group_key
        FROM items INDEXED BY items_parked_seq
        WHERE status = 'pending' AND group_key IS NOT NULL
          AND available_at >= 7258118400000000 AND available_at < 221845392000000000
        ORDER BY tenant_id, kind, group_key
        LIMIT 1)
    UNION ALL
    SELECT n.tenant_id, n.kind, n.group_key
    FROM g JOIN items n ON n.rowid = coalesce(
        (SELECT e.rowid
         FROM items e INDEXED BY items_parked_seq
         WHERE e.status = 'pending' AND e.group_key IS NOT NULL
           AND e.available_at >= 7258118400000000 AND e.available_at < 221845392000000000
           AND e.tenant_id = g.tenant_id AND e.kind = g.kind AND e.group_key > g.group_key
         ORDER BY e.group_key
         LIMIT 1),
        (SELECT e.rowid
         FROM items e INDEXED BY items_parked_seq
         WHERE e.status = 'pending' AND e.group_key IS NOT NULL
           AND e.available_at >= 7258118400000000 AND e.available_at < 221845392000000000
           AND e.tenant_id = g.tenant_id AND e.kind > g.kind
         ORDER BY e.kind, e.group_key
         LIMIT 1),
        (SELECT e.rowid
         FROM items e INDEXED BY items_parked_seq
         WHERE e.status = 'pending' AND e.group_key IS NOT NULL
           AND e.available_at >= 7258118400000000 AND e.available_at < 221845392000000000
           AND e.tenant_id > g.tenant_id
         ORDER BY e.tenant_id, e.kind, e.group_key
         LIMIT 1))
)
SELECT tenant_id, kind, group_key FROM g

-- Which tenant holds the item with this id, if any: a bulk insert's
-- collision check. Only the tenant is read, never the row, so nothing of
-- another tenant's item is handed back. ?1 id.
SELECT tenant_id FROM items WHERE id = ?1

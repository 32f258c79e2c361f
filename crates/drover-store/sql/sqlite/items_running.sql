-- The claimed items, oldest claim first, at most ?1. Reads the partial
-- index of claimed rows (items_claimed_lease, WHERE status = 'claimed'):
-- as many entries as items run now, whatever the table holds.
SELECT tenant_id, id, kind, lane, coalesce(claimed_by, '') AS worker, updated_at AS since
FROM items INDEXED BY items_claimed_lease
WHERE status = 'claimed'
ORDER BY updated_at, id
LIMIT ?1

-- unpark_pick.sql for an ordered group: in enqueue order (the rowid,
-- through items_parked_seq).
SELECT rowid AS rid
FROM items INDEXED BY items_parked_seq
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at >= 7258118400000000 AND available_at < 221845392000000000
ORDER BY rowid
LIMIT ?4

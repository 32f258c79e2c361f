-- The first ?4 parked items of group (?1 tenant, ?2 kind, ?3 group) in
-- claim order, by rowid, through items_parked (its terms repeated so
-- SQLite uses it). System operation, on the writer's transaction with
-- unpark_move.sql.
SELECT rowid AS rid
FROM items INDEXED BY items_parked
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at >= 7258118400000000 AND available_at < 221845392000000000
ORDER BY priority, available_at, rowid
LIMIT ?4

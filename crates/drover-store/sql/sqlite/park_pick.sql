-- The due pending items of group (?1 tenant, ?2 kind, ?3 group) beyond its
-- first ?4 in claim order, at most ?5, by rowid: what a pass parks. Due:
-- available at ?6 (micros). Items due before 1200-01-02 are left:
-- moved, they would land before 2200-01-01 and not read as parked (the
-- offset is 1,000 years of 365.2425 days, half a day short of the 1,000
-- calendar years from 1200 to 2200). No lock to take: it runs on the
-- single writer's transaction with the move (park_move.sql). System
-- operation.
SELECT rowid AS rid
FROM items INDEXED BY items_group_next
WHERE tenant_id = ?1 AND kind = ?2 AND group_key = ?3
  AND status = 'pending' AND group_key IS NOT NULL
  AND available_at <= ?6 AND available_at >= -24298790400000000
ORDER BY priority, available_at, rowid
LIMIT ?5 OFFSET ?4

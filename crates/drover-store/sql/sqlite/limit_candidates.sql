-- One page of the limited claim's candidates: pending, available items of
-- lane ?1 (of the kinds ?3 as a JSON array; NULL: every kind) in claim
-- order. ?2 now (micros), ?4 page size; the page starts after the claim
-- order position (?5 priority, ?6 available_at, ?7 rowid) the last page
-- ended at (the first page: the smallest integers), so a page is a range
-- of items_pending, never a re-read of the pages before it.
--
-- Left out: the kinds ?8 (a JSON array, NULL for none) whose limits are
-- full, and the groups ?9 (JSON array of kind, NUL, hex(tenant_id), NUL,
-- group; NULL for none) whose per-group limits are full. Admission
-- re-counts every candidate; this only keeps a full scope's backlog from
-- being read on every claim. The ordered mark below takes
-- limit_candidates_head.sql (parameters ?10, ?11) while an ordered limit
-- is in force.
SELECT i.id, i.tenant_id, i.lane, i.kind, i.group_key,
       i.priority, i.available_at, i.rowid AS rid
FROM items i INDEXED BY items_pending
WHERE i.status = 'pending'
  AND i.lane = ?1
  AND (i.priority, i.available_at, i.rowid) > (?5, ?6, ?7)
  AND i.available_at <= ?2
  AND (?3 IS NULL OR i.kind IN (SELECT value FROM json_each(?3)))
  AND (?8 IS NULL OR i.kind NOT IN (SELECT value FROM json_each(?8)))
  AND (?9 IS NULL OR i.group_key IS NULL
       OR (i.kind || char(0) || hex(i.tenant_id) || char(0) || i.group_key)
          NOT IN (SELECT value FROM json_each(?9)))
/*{ordered}*/
ORDER BY i.priority, i.available_at, i.rowid
LIMIT ?4

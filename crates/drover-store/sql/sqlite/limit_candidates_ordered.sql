-- limit_candidates.sql (the same parameters ?1 to ?9, the same paging) for
-- a claim while an ordered limit is in force (only a schema at migration
-- 0034 or later can hold one).
--
-- ?10 (a JSON array): the kinds whose per-group limit is ordered; ?11
-- (NULL for none) those of them that hold on a dead letter. An item of
-- such a kind with a group is a candidate only as its group's head: no
-- earlier item (by rowid, the insert order of the single writer) of the
-- same tenant, kind and group is pending, claimed, or failed under a hold.
-- The probe walks items_group_order, whose rows are only those statuses.
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
  AND NOT (
      i.group_key IS NOT NULL
      AND i.kind IN (SELECT value FROM json_each(?10))
      AND EXISTS (
          SELECT 1 FROM items e INDEXED BY items_group_order
          WHERE e.tenant_id = i.tenant_id
            AND e.kind = i.kind
            AND e.group_key = i.group_key
            AND e.rowid < i.rowid
            AND e.status IN ('pending', 'claimed', 'failed')
            AND (e.status <> 'failed'
                 OR (?11 IS NOT NULL AND e.kind IN (SELECT value FROM json_each(?11))))))
ORDER BY i.priority, i.available_at, i.rowid
LIMIT ?4

-- One page of the limited claim's candidates: pending, available items of
-- lane ?1 (of the kinds ?3 as a JSON array; NULL: every kind) in claim
-- order. ?2 now (micros), ?4 page size, ?5 offset.
--
-- The statement a claim runs when an ordered limit is in force (only a
-- schema at migration 0034 or later can hold one; limit_candidates.sql is
-- the one without the head probe).
--
-- ?6 (a JSON array): the kinds whose per-group
-- limit is ordered; ?7 those of them that hold on a dead letter. An item
-- of such a kind with a group is a candidate only as its group's head: no
-- earlier item (by rowid, the insert order of the single writer) of the
-- same tenant, kind and group is pending, claimed, or failed under a hold.
-- The probe walks items_group_order, whose rows are only those statuses.
SELECT i.id, i.tenant_id, i.lane, i.kind, i.group_key
FROM items i
WHERE i.status = 'pending'
  AND i.lane = ?1
  AND i.available_at <= ?2
  AND (?3 IS NULL OR i.kind IN (SELECT value FROM json_each(?3)))
  AND NOT (
      i.group_key IS NOT NULL
      AND i.kind IN (SELECT value FROM json_each(?6))
      AND EXISTS (
          SELECT 1 FROM items e INDEXED BY items_group_order
          WHERE e.tenant_id = i.tenant_id
            AND e.kind = i.kind
            AND e.group_key = i.group_key
            AND e.rowid < i.rowid
            AND e.status IN ('pending', 'claimed', 'failed')
            AND (e.status <> 'failed'
                 OR (?7 IS NOT NULL AND e.kind IN (SELECT value FROM json_each(?7))))))
ORDER BY i.priority, i.available_at
LIMIT ?4 OFFSET ?5

-- The head probe the limited claim adds to limit_candidates.sql (at its
-- ordered mark) while an ordered limit is in force, which only a
-- schema at migration 0034 or later can hold.
--
-- ?10 (a JSON array): the kinds whose per-group limit is ordered; ?11
-- (NULL for none) those of them that hold on a dead letter. An item of
-- such a kind with a group is a candidate only as its group's head: no
-- earlier item (by rowid, the insert order of the single writer) of the
-- same tenant, kind and group is pending, claimed, or failed under a hold.
-- The probe walks items_group_order, whose rows are only those statuses.
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

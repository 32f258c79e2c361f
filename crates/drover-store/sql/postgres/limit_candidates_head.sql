-- The head probe the limited claim adds to limit_candidates.sql (at its
-- ordered mark) while an ordered limit is in force, which only a
-- schema at migration 0034 or later can hold (without one the statement
-- runs without it, on any schema).
--
-- $8: the kinds whose per-group limit is ordered; $9 those of them that
-- hold on a dead letter. An item of such a kind with a group is a
-- candidate only as its group's head: no item of the same tenant, kind and
-- group with a lower seq is pending, claimed, or failed under a hold. The
-- probe walks items_group_order, which holds only those statuses. The head
-- is locked by the candidates statement, so no other claimer admits it; a
-- later item of its group is no head while it is pending or claimed, so no
-- claimer admits that one either.
  AND NOT (
      i.group_key IS NOT NULL
      AND i.kind = ANY($8::text[])
      AND EXISTS (
          SELECT 1 FROM items e
          WHERE e.tenant_id = i.tenant_id
            AND e.kind = i.kind
            AND e.group_key = i.group_key
            AND e.seq < i.seq
            AND e.status IN ('pending', 'claimed', 'failed')
            AND (e.status <> 'failed' OR e.kind = ANY($9::text[]))))

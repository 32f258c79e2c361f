-- The limited claim's candidates: pending, available items of lane $1 (of
-- the kinds $2; empty: every kind) in claim order, locked without waiting,
-- leaving out items of the kinds $4 and the (kind, tenant, group) triples
-- $5/$6/$7 whose limits were full when the claim began (an optimisation:
-- admission re-counts under the scope locks). At most $3.
--
-- The statement a claim runs when an ordered limit is in force (which
-- only a schema at migration 0034 or later can hold; limit_candidates.sql
-- is the one without the head probe, and runs on any schema).
--
-- $8: the kinds whose per-group limit is ordered; $9 those of them that
-- hold on a dead letter. An item of such a kind with a group is a
-- candidate only as its group's head: no item of the same tenant, kind and
-- group with a lower seq is pending, claimed, or failed under a hold. The
-- probe walks items_group_order, which holds only those statuses. The head
-- is locked here, so no other claimer admits it; a later item of its group
-- is no head while it is pending or claimed, so no claimer admits that one
-- either.
SELECT i.id, i.tenant_id, i.lane, i.kind, i.group_key
FROM items i
WHERE i.status = 'pending'
  AND i.lane = $1
  AND i.available_at <= now()
  AND (cardinality($2::text[]) = 0 OR i.kind = ANY($2))
  AND NOT (i.kind = ANY($4::text[]))
  AND NOT EXISTS (
      SELECT 1 FROM unnest($5::text[], $6::uuid[], $7::text[]) AS f(kind, tenant_id, group_key)
      WHERE f.kind = i.kind AND f.tenant_id = i.tenant_id AND f.group_key = i.group_key)
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
ORDER BY i.priority, i.available_at
LIMIT $3
FOR UPDATE OF i SKIP LOCKED

-- The limited claim's candidates: pending, available items of lane $1 (of
-- the kinds $2; empty: every kind) in claim order, locked without waiting,
-- leaving out items of the kinds $4 and the (kind, tenant, group) triples
-- $5/$6/$7 whose limits were full when the claim began (an optimisation:
-- admission re-counts under the scope locks). At most $3. The ordered
-- mark below takes limit_candidates_head.sql while an ordered limit is
-- in force.
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
/*{ordered}*/
ORDER BY i.priority, i.available_at
LIMIT $3
FOR UPDATE OF i SKIP LOCKED

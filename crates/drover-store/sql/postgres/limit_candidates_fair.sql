-- The fair limited claim's candidates: each tenant $3[k]'s next pending,
-- available items of lane $1 (of the kinds $2; empty: every kind) in claim
-- order, at most $10[k], locked without waiting: one descent of
-- items_fair per tenant. The same filters as limit_candidates.sql: left
-- out are the kinds $4 and the (kind, tenant, group) triples $5/$6/$7
-- whose limits were full when the claim began (admission re-counts under
-- the scope locks), and with the head probe of limit_candidates_head.sql
-- ($8: the kinds whose per-group limit is ordered, $9: those that hold on
-- a dead letter; both empty while no ordered limit is in force, and the
-- probe is then never run), an item of an ordered group that is not its
-- group's head.
SELECT c.id, c.tenant_id, c.lane, c.kind, c.group_key, c.priority, c.available_at
FROM unnest($3::uuid[], $10::bigint[]) AS q(tenant_id, cap)
CROSS JOIN LATERAL (
    SELECT i.id, i.tenant_id, i.lane, i.kind, i.group_key, i.priority, i.available_at
    FROM items i
    WHERE i.status = 'pending'
      AND i.lane = $1
      AND i.tenant_id = q.tenant_id
      AND i.available_at <= now()
      AND (cardinality($2::text[]) = 0 OR i.kind = ANY($2))
      AND NOT (i.kind = ANY($4::text[]))
      AND NOT EXISTS (
          SELECT 1 FROM unnest($5::text[], $6::uuid[], $7::text[]) AS f(kind, tenant_id, group_key)
          WHERE f.kind = i.kind AND f.tenant_id = i.tenant_id AND f.group_key = i.group_key)
/*{ordered}*/
    ORDER BY i.priority, i.available_at
    LIMIT q.cap
    FOR UPDATE OF i SKIP LOCKED) c

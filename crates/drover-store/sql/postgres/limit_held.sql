-- The claims holding slots: claimed items of lane $1 or of the kinds $2
-- (from the small claimed set, items_tenant_stale). Read after the scope
-- locks, in a statement of its own, so it sees every claim committed by a
-- claimer that held one of them before.
SELECT lane, kind, tenant_id, group_key
FROM items
WHERE status = 'claimed'
  AND (lane = $1 OR kind = ANY($2::text[]))

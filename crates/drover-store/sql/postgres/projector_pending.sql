-- System role: the runner's discovery page. Tenants after $2 (NULL: from
-- the first) whose head is past projector $1's checkpoint (no row: 0) or
-- whose rebuild is asked, at most $3, in tenant order. Caught-up tenants
-- are skipped here, not by a read per tenant.
SELECT h.tenant_id
FROM event_heads h
LEFT JOIN projector_checkpoints c ON c.tenant_id = h.tenant_id AND c.projector = $1
WHERE ($2::uuid IS NULL OR h.tenant_id > $2)
  AND (h.head > COALESCE(c.position, 0) OR COALESCE(c.rebuild_requested, false))
ORDER BY h.tenant_id
LIMIT $3

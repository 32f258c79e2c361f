-- One tenant's lease-expired claims, oldest lease first, bounded.
-- ?1 tenant_id, ?2 now, ?3 limit.
SELECT id, claim_token, attempts FROM items
WHERE tenant_id = ?1 AND status = 'claimed' AND lease_expires_at <= ?2
ORDER BY lease_expires_at
LIMIT ?3

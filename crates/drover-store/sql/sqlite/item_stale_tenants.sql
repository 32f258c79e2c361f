-- Tenants holding claimed items whose lease has passed (system operation).
-- The stale filter is the SQL twin of rules::is_stale.
-- ?1 now, ?2 limit.
SELECT DISTINCT tenant_id FROM items
WHERE status = 'claimed' AND lease_expires_at <= ?1
LIMIT ?2

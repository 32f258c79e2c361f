-- Tenants with claimed items whose lease has passed (rules::is_stale).
-- System role.
SELECT DISTINCT tenant_id
FROM items
WHERE status = 'claimed' AND lease_expires_at <= now()
LIMIT $1

-- The relay's claim (across tenants): up to ?1 pending rows, available and
-- holding no live claim at ?2 (now), oldest first, stamped with token ?3
-- and lease expiry ?4. The one writer's BEGIN IMMEDIATE makes it exclusive.
UPDATE outbox
SET claim_token = ?3, lease_expires_at = ?4
WHERE id IN (
    SELECT id FROM outbox
    WHERE status = 'pending'
      AND available_at <= ?2
      AND (lease_expires_at IS NULL OR lease_expires_at <= ?2)
    ORDER BY created_at
    LIMIT ?1
)
RETURNING id, tenant_id, kind, payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at

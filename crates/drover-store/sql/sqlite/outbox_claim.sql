-- The relay's claim (across tenants): up to ?1 pending rows, available and
-- holding no live claim at ?2 (now), oldest first, stamped with token ?3
-- and lease expiry ?4. The one writer's BEGIN IMMEDIATE makes it exclusive.
-- An event.* row is taken only while no live claim holds an event.* row of
-- its tenant, so one tenant's events are relayed by one claim at a time,
-- oldest first.
UPDATE outbox
SET claim_token = ?3, lease_expires_at = ?4
WHERE id IN (
    SELECT id FROM outbox o
    WHERE status = 'pending'
      AND available_at <= ?2
      AND (lease_expires_at IS NULL OR lease_expires_at <= ?2)
      AND (o.kind NOT GLOB 'event.*' OR NOT EXISTS (
            SELECT 1 FROM outbox c
            WHERE c.tenant_id = o.tenant_id
              AND c.claim_token IS NOT NULL AND c.kind GLOB 'event.*'
              AND c.status = 'pending' AND c.lease_expires_at > ?2))
    ORDER BY created_at
    LIMIT ?1
)
RETURNING id, tenant_id, kind, payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at, lane, priority, max_attempts, group_key

-- One row of tenant ?1.
SELECT id, tenant_id, kind, payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at, lane, priority, max_attempts, group_key
FROM outbox
WHERE tenant_id = ?1 AND id = ?2

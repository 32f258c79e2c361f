-- One row of the transaction's tenant (RLS scopes it).
SELECT id, tenant_id, kind, payload::text AS payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at, lane, priority, max_attempts, group_key
FROM outbox
WHERE id = $1
LIMIT 1

-- Rows newest first, optionally of one status ($1); scoped by RLS to the
-- transaction's tenant, or every tenant's under the system role.
SELECT id, tenant_id, kind, payload::text AS payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at, lane, priority, max_attempts, group_key
FROM outbox
WHERE ($1::text IS NULL OR status = $1)
ORDER BY created_at DESC, id DESC
LIMIT $2

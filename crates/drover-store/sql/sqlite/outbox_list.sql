-- Rows newest first: of tenant ?1 (NULL: every tenant), of status ?2
-- (NULL: any), at most ?3.
SELECT id, tenant_id, kind, payload, actor, request_id, traceparent, created_at, status, attempts, available_at, last_error, claim_token, lease_expires_at, relayed_at, lane, priority, max_attempts, group_key
FROM outbox
WHERE (?1 IS NULL OR tenant_id = ?1)
  AND (?2 IS NULL OR status = ?2)
ORDER BY created_at DESC, id DESC
LIMIT ?3

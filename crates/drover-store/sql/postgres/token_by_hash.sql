-- The live token with this hash. System role (no tenant is known yet).
SELECT id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at, work
FROM api_tokens
WHERE hash = $1 AND revoked_at IS NULL

-- Every token, oldest first.
SELECT id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at, work
FROM api_tokens
ORDER BY created_at, id

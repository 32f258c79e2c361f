-- Store a token's hash and grants. System role.
INSERT INTO api_tokens (id, hash, role, scope_tenant, enqueue, label, work)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at, work

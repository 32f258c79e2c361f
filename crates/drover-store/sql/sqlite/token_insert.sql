-- Store a token's hash and grants ($7: the store's clock).
INSERT INTO api_tokens (id, hash, role, scope_tenant, enqueue, label, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
RETURNING id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at

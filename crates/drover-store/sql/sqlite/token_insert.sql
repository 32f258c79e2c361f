-- Store a token's hash and grants ($7: the store's clock; $8: the work grants as JSON).
INSERT INTO api_tokens (id, hash, role, scope_tenant, enqueue, label, created_at, work)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
RETURNING id, hash, role, scope_tenant, enqueue, label, created_at, revoked_at, work

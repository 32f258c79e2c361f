-- A new record at version 1, running its first step. A collision on the id
-- or on (tenant, key) inserts nothing and returns no row. Runtime role.
INSERT INTO orchestrations (
    id, tenant_id, kind, lane, max_attempts, status, step, state, version,
    completed, history, idempotency_key, created_at, updated_at
) VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, 1, '[]', '[]', $8, now(), now())
ON CONFLICT DO NOTHING
RETURNING *

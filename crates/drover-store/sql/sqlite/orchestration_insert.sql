-- A new record at version 1, running its first step. A collision on the id
-- or on (tenant, key) inserts nothing and returns no row.
-- ?1 id, ?2 tenant, ?3 kind, ?4 lane, ?5 max_attempts, ?6 step, ?7 state,
-- ?8 key, ?9 now.
INSERT INTO orchestrations (
    id, tenant_id, kind, lane, max_attempts, status, step, state, version,
    completed, history, idempotency_key, created_at, updated_at
) VALUES (?1, ?2, ?3, ?4, ?5, 'running', ?6, ?7, 1, '[]', '[]', ?8, ?9, ?9)
ON CONFLICT DO NOTHING
RETURNING *

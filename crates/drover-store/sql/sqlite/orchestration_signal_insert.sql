-- A signal, kept until a park or a wake-up consumes it; a resent key
-- inserts nothing and returns no row.
-- ?1 id, ?2 tenant, ?3 orchestration, ?4 name, ?5 payload, ?6 key, ?7 now.
INSERT INTO orchestration_signals (
    id, tenant_id, orchestration_id, name, payload, idempotency_key, consumed_at, created_at
) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)
ON CONFLICT DO NOTHING
RETURNING id

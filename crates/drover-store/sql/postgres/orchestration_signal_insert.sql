-- A signal, kept until a park or a wake-up consumes it; a resent key
-- inserts nothing and returns no row. Runtime role.
INSERT INTO orchestration_signals (
    id, tenant_id, orchestration_id, name, payload, idempotency_key, consumed_at, created_at
) VALUES ($1, $2, $3, $4, $5, $6, NULL, now())
ON CONFLICT DO NOTHING
RETURNING id

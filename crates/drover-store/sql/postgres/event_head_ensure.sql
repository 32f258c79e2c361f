-- The tenant's head row, created at its first append. Runtime role, the
-- tenant set for the transaction.
INSERT INTO event_heads (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING

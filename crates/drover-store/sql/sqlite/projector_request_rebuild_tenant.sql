-- Asks the runner of (projector, tenant) to rebuild; creates the row if the
-- projector has not run for the tenant yet.
INSERT INTO projector_checkpoints (tenant_id, projector, rebuild_requested, created_at, updated_at)
VALUES (?1, ?2, 1, ?3, ?3)
ON CONFLICT (tenant_id, projector) DO UPDATE SET rebuild_requested = 1, updated_at = ?3

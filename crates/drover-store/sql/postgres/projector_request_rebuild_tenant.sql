-- Asks the runner of (projector, tenant) to rebuild; creates the row if the
-- projector has not run for the tenant yet. Runtime role, tenant set.
INSERT INTO projector_checkpoints (tenant_id, projector, rebuild_requested)
VALUES ($1, $2, true)
ON CONFLICT (tenant_id, projector) DO UPDATE SET rebuild_requested = true, updated_at = now()

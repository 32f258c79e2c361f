-- Takes the lease of (projector, tenant) when free or passed on the store's
-- clock (?6 = now), creating the row at checkpoint 0 on first use. No row
-- back: another runner holds it. Under the one writer.
INSERT INTO projector_checkpoints (tenant_id, projector, lease_token, lease_holder, lease_expires_at,
                                   created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
ON CONFLICT (tenant_id, projector) DO UPDATE
SET lease_token = excluded.lease_token,
    lease_holder = excluded.lease_holder,
    lease_expires_at = excluded.lease_expires_at,
    updated_at = excluded.updated_at
WHERE projector_checkpoints.lease_expires_at IS NULL
   OR projector_checkpoints.lease_expires_at <= ?6
RETURNING position, rebuild_requested

-- Takes the lease of (projector, tenant) when free or passed on the
-- database clock, creating the row at checkpoint 0 on first use. No row
-- back: another runner holds it. Concurrent takers serialise on the row
-- and the later one re-checks the committed lease. Runtime role, tenant set.
INSERT INTO projector_checkpoints (tenant_id, projector, lease_token, lease_holder, lease_expires_at)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
ON CONFLICT (tenant_id, projector) DO UPDATE
SET lease_token = EXCLUDED.lease_token,
    lease_holder = EXCLUDED.lease_holder,
    lease_expires_at = EXCLUDED.lease_expires_at,
    updated_at = now()
WHERE projector_checkpoints.lease_expires_at IS NULL
   OR projector_checkpoints.lease_expires_at <= now()
RETURNING position, rebuild_requested

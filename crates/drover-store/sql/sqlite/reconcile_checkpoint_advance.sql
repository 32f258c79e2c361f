-- Moves a checkpoint past a batch: a compare-and-set on its version.
-- ?1 tenant, ?2 reconciler, ?3 expected version, ?4 new cursor,
-- ?5 changes applied, ?6 now.
UPDATE sync_checkpoints
SET cursor = ?4, version = version + 1, applied = applied + ?5, updated_at = ?6
WHERE tenant_id = ?1 AND reconciler = ?2 AND version = ?3
RETURNING version

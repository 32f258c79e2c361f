-- The first batch's checkpoint, at version 1; a racing first batch finds the
-- row there and inserts nothing (no row returned: the caller's Conflict).
-- ?1 tenant, ?2 reconciler, ?3 cursor, ?4 changes applied, ?5 now.
INSERT INTO sync_checkpoints (tenant_id, reconciler, cursor, version, applied, updated_at)
VALUES (?1, ?2, ?3, 1, ?4, ?5)
ON CONFLICT (tenant_id, reconciler) DO NOTHING
RETURNING version

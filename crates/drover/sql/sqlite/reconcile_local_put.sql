-- A local write to a record: its value and version, marked changed locally.
-- ?1 tenant, ?2 reconciler, ?3 key, ?4 data, ?5 version, ?6 now.
INSERT INTO sync_records (tenant_id, reconciler, key, data, version, dirty, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6)
ON CONFLICT (tenant_id, reconciler, key) DO UPDATE
SET data = excluded.data, version = excluded.version, dirty = 1, updated_at = excluded.updated_at
RETURNING *

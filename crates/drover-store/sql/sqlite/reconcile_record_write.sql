-- Writes one record of a batch, a local put or a resolution, decided in
-- Rust against the record read in the same write transaction. ?1 tenant,
-- ?2 reconciler, ?3 key, ?4 data, ?5 version, ?6 source version, ?7 dirty,
-- ?8 parked review, ?9 now, ?10 revision, ?11 deleted.
INSERT INTO sync_records (tenant_id, reconciler, key, data, version, source_version, dirty,
                          review, updated_at, revision, deleted)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT (tenant_id, reconciler, key) DO UPDATE
SET data = excluded.data, version = excluded.version, source_version = excluded.source_version,
    dirty = excluded.dirty, review = excluded.review, updated_at = excluded.updated_at,
    revision = excluded.revision, deleted = excluded.deleted

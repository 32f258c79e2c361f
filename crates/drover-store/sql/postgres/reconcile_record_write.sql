-- Writes records (one row per key) in one statement, under the
-- transaction's tenant: a batch's records it holds locked (or inserted
-- itself), a local put's, a resolution's. $1 tenant, $2 reconciler,
-- $3 keys, $4 data, $5 versions, $6 source versions, $7 dirty flags,
-- $8 parked reviews, $9 revisions, $10 deleted flags.
INSERT INTO sync_records (tenant_id, reconciler, key, data, version, source_version, dirty,
                          review, revision, deleted, updated_at)
SELECT $1, $2, k, d, v, sv, dt, rv, rn, dl, now()
FROM unnest($3::text[], $4::jsonb[], $5::bigint[], $6::bigint[], $7::boolean[], $8::jsonb[],
            $9::bigint[], $10::boolean[])
    AS t(k, d, v, sv, dt, rv, rn, dl)
ON CONFLICT (tenant_id, reconciler, key) DO UPDATE
SET data = excluded.data, version = excluded.version, source_version = excluded.source_version,
    dirty = excluded.dirty, review = excluded.review, revision = excluded.revision,
    deleted = excluded.deleted, updated_at = excluded.updated_at

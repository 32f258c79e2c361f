-- Writes a batch's records (one row per key) in one statement, under the
-- transaction's tenant. $1 tenant, $2 reconciler, $3 keys, $4 data,
-- $5 versions, $6 source versions, $7 dirty flags, $8 parked reviews.
INSERT INTO sync_records (tenant_id, reconciler, key, data, version, source_version, dirty,
                          review, updated_at)
SELECT $1, $2, k, d, v, sv, dt, rv, now()
FROM unnest($3::text[], $4::jsonb[], $5::bigint[], $6::bigint[], $7::boolean[], $8::jsonb[])
    AS t(k, d, v, sv, dt, rv)
ON CONFLICT (tenant_id, reconciler, key) DO UPDATE
SET data = excluded.data, version = excluded.version, source_version = excluded.source_version,
    dirty = excluded.dirty, review = excluded.review, updated_at = excluded.updated_at

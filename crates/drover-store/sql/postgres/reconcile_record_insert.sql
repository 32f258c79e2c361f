-- Inserts records of keys the writer found absent, or nothing for a key
-- that appeared meanwhile (a local put committed after the writer's read):
-- the keys returned are the ones inserted; the writer re-reads the others
-- under lock and decides again. Same parameters as reconcile_record_write.
INSERT INTO sync_records (tenant_id, reconciler, key, data, version, source_version, dirty,
                          review, revision, deleted, updated_at)
SELECT $1, $2, k, d, v, sv, dt, rv, rn, dl, now()
FROM unnest($3::text[], $4::jsonb[], $5::bigint[], $6::bigint[], $7::boolean[], $8::jsonb[],
            $9::bigint[], $10::boolean[])
    AS t(k, d, v, sv, dt, rv, rn, dl)
ORDER BY k
ON CONFLICT (tenant_id, reconciler, key) DO NOTHING
RETURNING key

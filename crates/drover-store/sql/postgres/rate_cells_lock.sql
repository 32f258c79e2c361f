-- Locks the cells of the keys $1 for the claim's transaction and reads
-- them: a missing cell is created idle (at now()), an existing one is
-- locked by the no-op update, and either is returned with the
-- transaction's now(), the clock every admission of the claim uses. The
-- keys are taken in key order, so two claimers never wait on each other in
-- a circle; a claimer that waited reads the cell its predecessor
-- committed (ON CONFLICT DO UPDATE reads the latest row version).
-- `stale`: the transaction began more than the grace $2 (microseconds;
-- CELL_GRACE in rates.rs) before it held the locks, so its clock may be
-- earlier than a cell the purge deleted meanwhile; it admits nothing.
INSERT INTO rate_cells AS c (tenant_id, key, tat)
SELECT '00000000-0000-0000-0000-000000000000'::uuid, k, now()
FROM (SELECT DISTINCT k FROM unnest($1::text[]) AS k) AS keys
ORDER BY k
ON CONFLICT (tenant_id, key) DO UPDATE SET tat = c.tat
RETURNING c.key, c.tat, now() AS now,
    clock_timestamp() - now() > make_interval(secs => $2::bigint / 1e6) AS stale

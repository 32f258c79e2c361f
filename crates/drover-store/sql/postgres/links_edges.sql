-- The edges of a linked enqueue, and each dependant's count of open
-- dependencies (with the time it asked to run at, if any).
WITH edges AS (
    INSERT INTO item_deps (tenant_id, dep_id, item_id, policy, resolved)
    SELECT $1, d, i, p, r
    FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::bool[]) AS t(d, i, p, r)
)
INSERT INTO item_waits (tenant_id, item_id, deps_left, run_at)
SELECT $1, i, n, a
FROM unnest($6::uuid[], $7::int[], $8::timestamptz[]) AS t(i, n, a)

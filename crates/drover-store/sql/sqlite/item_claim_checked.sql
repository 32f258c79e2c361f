-- The claim of item_claim.sql behind the flow settings' generation
-- (migration 0046): ?8 is the generation the caller's rates and closures
-- were read at, compared with the row on the writer's transaction (the
-- subquery is uncorrelated: read once). When it moved, nothing is
-- claimed; the caller, finding no row, reads the generation to tell that
-- apart from an empty lane. The check is the LIMIT, not a WHERE term:
-- SQLite tests a WHERE term row by row, so a moved generation walked
-- every pending item of the lane to claim nothing
-- (item_claim_one_tenant.sql says more).
-- ?1 claimed_by, ?2 lease_expires_at, ?3 now, ?4 system actor,
-- ?5 lane, ?6 kinds as a JSON array (NULL: every kind), ?7 limit, ?8 the
-- generation.
UPDATE items
SET status           = 'claimed',
    claim_token      = randomblob(16),
    claimed_by       = ?1,
    claim_seq        = claim_seq + 1,
    lease_expires_at = ?2,
    updated_at       = ?3,
    updated_by       = ?4
WHERE id IN (
    SELECT id FROM items
    WHERE status = 'pending'
      AND lane = ?5
      AND available_at <= ?3
      AND (?6 IS NULL OR kind IN (SELECT value FROM json_each(?6)))
    ORDER BY priority, available_at
    LIMIT CASE WHEN ?8 = (SELECT gen FROM flow_generation WHERE id = 1) THEN ?7 ELSE 0 END
)
RETURNING *

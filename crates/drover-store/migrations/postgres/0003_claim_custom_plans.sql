-- drover 0003: the claim function in PL/pgSQL.
--
-- As a LANGUAGE sql function with SET clauses (never inlined), 0002's claim
-- was planned on every call with its arguments as unknown parameters: the
-- planner could not see the LIMIT, estimated a tenth of the backlog, and
-- chose to sort every pending row of the lane (claim latency grew with the
-- backlog: 2.9 ms at 10k, 283 ms at 1M). PL/pgSQL runs the same statement
-- through the plan cache, which plans with the actual values and keeps a
-- generic plan only when it is no costlier, as a prepared statement does,
-- so the claim walks the pending index in order and stops at the limit.
-- Dropped and created, not replaced: PostgreSQL refuses CREATE OR REPLACE
-- on a function whose SET clause carries a role.
DROP FUNCTION claim_items(text, text[], text, float8, bigint);
CREATE FUNCTION claim_items(p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint)
RETURNS SETOF items
LANGUAGE plpgsql
SET role = 'drover_system'
SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN QUERY
    WITH picked AS (
        SELECT i.id
        FROM items i
        WHERE i.status = 'pending'
          AND i.lane = p_lane
          AND i.available_at <= now()
          AND (cardinality(p_kinds) = 0 OR i.kind = ANY(p_kinds))
        ORDER BY i.priority, i.available_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE items
    SET status = 'claimed',
        claim_token = gen_random_uuid(),
        claim_seq = items.claim_seq + 1,
        claimed_by = p_worker,
        lease_expires_at = now() + make_interval(secs => p_lease),
        updated_at = now(),
        updated_by = '00000000-0000-0000-0000-000000000000'::uuid
    FROM picked
    WHERE items.id = picked.id
    RETURNING items.*;
END
$$;

REVOKE ALL ON FUNCTION claim_items(text, text[], text, float8, bigint) FROM PUBLIC;

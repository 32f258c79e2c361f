-- drover 0055: the room a lane or kind limit has left, counted without
-- spelling a scope key per claimed row.
--
-- claim_limited_room (0036) answers, before a claim no per-group limit
-- applies to, how many slots the tightest of its lane's and kinds' limits
-- has free; with room for the whole claim the claim is claim_items' own.
-- It counted through claim_limited_held, which builds each claimed row's
-- scope keys as text ('lane:' || lane, 'kind:' || kind), unnests them and
-- groups by the strings: about 1 us a claimed row. A worker's adaptive
-- prefetch holds hundreds of claimed items ready in a quick drain, so a
-- limit that never binds paid about 1 ms of every claim to count them
-- (pg_stat_user_functions over a `drover bench --limits` drain: 636 calls,
-- 631 ms in claim_limited_held). The count here groups the same rows by
-- (in the lane, kind) and sums per limit: the same answer from the same
-- rows (read through the same partial index, under the same scope locks,
-- which the caller took before calling), about 0.3 ms at 1,000 claimed
-- rows. claim_limited_held itself is unchanged: the per-group path needs
-- its keys.
CREATE OR REPLACE FUNCTION claim_limited_room(p_lane text, p_kinds text[], p_lane_limit integer,
                                              p_kind_names text[], p_kind_limits integer[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- The claimed set through its partial index, as claim_limited_held reads
-- it (an index scan marks dead entries as it passes them).
SET enable_bitmapscan = off
AS $body$
DECLARE
    v_lane  bigint;
    v_kinds text[];
    v_ns    bigint[];
BEGIN
    -- The claimed rows of the lane or of a limited kind, per (in the
    -- lane, kind): the lane's held slots are the first column's rows, a
    -- kind's are its kind's rows in any lane.
    SELECT coalesce(sum(h.n) FILTER (WHERE h.in_lane), 0),
           coalesce(array_agg(h.kind), '{}'), coalesce(array_agg(h.n), '{}')
    INTO v_lane, v_kinds, v_ns
    FROM (
        SELECT i.lane = p_lane AS in_lane, i.kind, count(*) AS n
        FROM items i
        WHERE i.status = 'claimed'
          AND (i.lane = p_lane OR i.kind = ANY(p_kind_names))
        GROUP BY 1, 2
    ) AS h;
    RETURN (
        SELECT coalesce(min(l.n - l.held), 9223372036854775807)
        FROM (
            SELECT p_lane_limit::bigint AS n, v_lane AS held
            WHERE p_lane_limit IS NOT NULL
            UNION ALL
            SELECT u.kl, (SELECT coalesce(sum(v_ns[j]), 0)
                          FROM generate_subscripts(v_kinds, 1) AS j
                          WHERE v_kinds[j] = u.kn)
            FROM unnest(p_kind_names, p_kind_limits) AS u(kn, kl)
            WHERE cardinality(p_kinds) = 0 OR u.kn = ANY(p_kinds)
        ) AS l);
END
$body$;

-- drover 0057: the fair claim in one call (docs/flow-control.md, "The
-- fair claim in one call"; src/postgres/fair_call.rs).
--
-- A fair claim was a transaction of four round trips from the client (its
-- BEGIN with the plan settings, the lane's lock with the first candidates,
-- the claim with the moved passes, COMMIT), where a claim without fair
-- share is one call; at 10,000 tenants its p99 was 3-4x the other's. When
-- the claiming process kept the lane's passes (the version token it wrote
-- last is still the lane's), it has already drawn the round: the tenants,
-- each with its pass lifted to the lane's virtual time, its stride and how
-- many candidates to read. fair_claim_call does the rest in the server:
--
-- 1. locks the lane's row (as FAIR_LOCK does) and checks the token is
--    still p_kept ('moved' otherwise: the caller claims as before, under
--    its own lock) and the flow settings' generation still p_gen ('stale');
-- 2. in a statement begun after the lock (so it reads what every fair
--    claim before it committed): each tenant's next due items in claim
--    order, at most its cap; the i-th of tenant t given the virtual start
--    pass(t) + (i - 1) * stride(t); the p_limit least virtual starts (ties
--    by the items' claim order) claimed as limit_claim.sql claims them;
--    each tenant that started n items moved to pass(t) + n * stride(t);
-- 3. when anything was claimed, the lane's row: its virtual time raised to
--    the latest start's pass and the version token p_new.
--
-- Taking the least virtual starts is the stride rule of src/fairness.rs
-- one start at a time (each start goes to the tenant whose pass is least,
-- which then moves by its stride), so the caller moves its kept passes by
-- the same starts and keeps them at p_new. An item another claimer took
-- after the read is skipped by the claim's own pending check (the claim is
-- then short, as the client-side claim would be).
--
-- Returns one row per claimed item (outcome 'claimed'), no row when
-- nothing was claimed, or one row with outcome 'moved' or 'stale' and no
-- item.

DO $do$
DECLARE
    v_sys text;
    f     text := 'fair_claim_call(text, text[], text, float8, bigint, bigint, bigint, bigint, '
                  'uuid[], bigint[], bigint[], bigint[])';
    o     text;
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();

    EXECUTE format($f$
CREATE FUNCTION fair_claim_call(
    p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint,
    p_kept bigint, p_new bigint, p_gen bigint,
    p_tenants uuid[], p_passes bigint[], p_strides bigint[], p_caps bigint[])
RETURNS TABLE (outcome text, claimed items)
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_version bigint;
    v_latest  bigint;
    r         record;
BEGIN
    -- 1. The lane's row, locked; the token and the generation checked.
    SELECT l.started INTO v_version
    FROM fair_passes l
    WHERE l.lane = p_lane AND l.tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff'
    FOR UPDATE;
    IF NOT FOUND OR v_version <> p_kept THEN
        outcome := 'moved';
        claimed := NULL;
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_gen IS NOT NULL AND p_gen IS DISTINCT FROM (SELECT g.gen FROM flow_generation g LIMIT 1) THEN
        outcome := 'stale';
        claimed := NULL;
        RETURN NEXT;
        RETURN;
    END IF;

    -- 2. The least virtual starts claimed, their tenants' passes moved,
    -- and the pass of the latest start (a tenant that started n items
    -- last started at its new pass less one stride).
    FOR r IN
        WITH q AS (
            SELECT u.t, u.pass, u.stride, u.cap
            FROM unnest(p_tenants, p_passes, p_strides, p_caps) AS u(t, pass, stride, cap)
        ), cand AS (
            SELECT x.id, x.priority, x.available_at,
                   q.pass + (x.k - 1) * q.stride AS v
            FROM q
            CROSS JOIN LATERAL (
                SELECT i.id, i.priority, i.available_at,
                       row_number() OVER (ORDER BY i.priority, i.available_at) AS k
                FROM (
                    SELECT i.id, i.priority, i.available_at FROM items i
                    WHERE i.lane = p_lane AND i.status = 'pending' AND i.tenant_id = q.t
                      AND i.available_at <= now()
                      AND (cardinality(p_kinds) = 0 OR i.kind = ANY(p_kinds))
                    ORDER BY i.priority, i.available_at
                    LIMIT q.cap
                ) AS i
            ) AS x
        ), pick AS (
            SELECT cand.id FROM cand
            ORDER BY cand.v, cand.priority, cand.available_at, cand.id
            LIMIT p_limit
        ), done AS (
            -- As limit_claim.sql: each id through the primary key, the
            -- pending check on the row's latest version.
            UPDATE items
            SET status = 'claimed',
                claim_token = gen_random_uuid(),
                claim_seq = items.claim_seq + 1,
                claimed_by = p_worker,
                lease_expires_at = now() + make_interval(secs => p_lease),
                updated_at = now(),
                updated_by = '00000000-0000-0000-0000-000000000000'::uuid
            FROM pick
            WHERE items.id = pick.id AND coalesce(items.status, '') = 'pending'
            RETURNING items AS item, items.tenant_id AS t
        ), n AS (
            SELECT done.t, count(*) AS n FROM done GROUP BY done.t
        ), moved AS (
            INSERT INTO fair_passes (lane, tenant_id, pass, started)
            SELECT p_lane, q.t, q.pass + n.n * q.stride, n.n
            FROM n JOIN q ON q.t = n.t
            ON CONFLICT (lane, tenant_id) DO UPDATE
            SET pass = excluded.pass, started = fair_passes.started + excluded.started
        )
        SELECT done.item,
               (SELECT max(q.pass + (n.n - 1) * q.stride) FROM n JOIN q ON q.t = n.t) AS latest
        FROM done
    LOOP
        v_latest := r.latest;
        outcome := 'claimed';
        claimed := r.item;
        RETURN NEXT;
    END LOOP;

    -- 3. When anything was claimed, the lane's row: its virtual time
    -- raised to the latest start's pass, and the new version token.
    IF v_latest IS NOT NULL THEN
        UPDATE fair_passes l
        SET pass = greatest(l.pass, v_latest), started = p_new
        WHERE l.lane = p_lane AND l.tenant_id = 'ffffffff-ffff-ffff-ffff-ffffffffffff';
    END IF;
END
$body$
$f$, v_sys);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, v_sys);

    -- As claim_limited: one generic plan per session that walks the
    -- indexes, and no JIT compilation.
    FOREACH o IN ARRAY ARRAY['plan_cache_mode = force_generic_plan', 'enable_seqscan = off',
                             'enable_bitmapscan = off', 'enable_sort = off',
                             'enable_hashjoin = off', 'enable_mergejoin = off', 'jit = off'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET %s', f, o);
    END LOOP;
END
$do$;

-- drover 0036: the limited claim in one round trip (docs/flow-control.md).
--
-- A claim a concurrency limit may apply to ran as a transaction of six
-- statements from the worker (the held slots, the candidates, the scope
-- locks, the held slots again, the UPDATE, the commit): six round trips,
-- and the candidates planned on every call, where an unlimited claim is one
-- call into claim_items. A limit that never binds cost 0.4 of the drain.
-- claim_limited runs the same steps inside the server, with the same
-- scope keys and locks as the statements it replaces (a worker of the
-- version before, in a rolling upgrade, excludes this one key by key):
--
-- 0. a claim no per-group limit applies to knows every key it can count
--    against before it reads a candidate (its lane's, and each limited
--    kind it may claim): it locks them first (step 3 moves here) and
--    counts their free slots (claim_limited_room); with room for the whole
--    claim, the claim is claim_items' own (a limit that does not bind
--    costs a lock and that count, no candidates), and otherwise it goes on
--    below under the locks it holds;
-- 1. the slots held as the claim begins, counted per scope key from the
--    claimed rows: a full lane returns nothing, full kinds and groups are
--    left out of the candidates (so a full group's backlog never fills the
--    window);
-- 2. the candidates, each floor stripe in priority order as claim_items
--    walks them (the floors keep the walk off the dead entries of earlier
--    claims), read without a row lock (a lock writes each row, and most
--    candidates of a binding limit are only read past); an ordered group's
--    item only as its group's head;
-- 3. a transaction lock on each scope key the candidates count against,
--    all in one statement in hash order (no cycle of waits), held to the
--    commit: the next claimer of a key counts this one's claims;
-- 4. the held slots again, in a statement after the locks (a new
--    snapshot: every claim of a key's earlier holder is in it; not needed
--    when the locks came first), and admission in claim order: a
--    candidate is admitted when each of its keys has a free slot, and
--    takes one of each;
-- 5. one UPDATE of the admitted that are still pending, each locked SKIP
--    LOCKED first. A candidate another claimer took since it was read is
--    no longer pending and is skipped; one it holds a key of was counted
--    by the read after the locks. So admission may come out short, never
--    over a limit, and a later item of an ordered group never passes its
--    head: it was a candidate only if its head was final when read.
--
-- The limits themselves come from the caller (its cached, effective
-- settings: an operator's row wins over code's), as arrays: the lane's
-- limit, the kind limits, the per-group limits, the ordered kinds and
-- those of them that hold on a dead letter. A scope key is spelt as the
-- store's keys_of spells it: lane:L, kind:K, group:K:TENANT:G.
--
-- Plans: as claim_items and complete_items (0027), one generic plan per
-- session that can only walk the indexes, whatever the statistics say;
-- and no JIT compilation (below).
DO $do$
DECLARE
    v_sys text;
    f     text;
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();

    -- A lane's claim floors read again (0025's refresh, as claim_items runs
    -- it): each stripe's first pending entry by a loose scan, and the
    -- stripes with nothing pending trailing the clock. The caller holds the
    -- lane's refresh lock.
    EXECUTE $f$
CREATE FUNCTION claim_floors_refresh(p_lane text)
RETURNS void
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $body$
BEGIN
    WITH RECURSIVE firsts AS (
        (SELECT i.priority, i.available_at FROM items i
         WHERE i.lane = p_lane AND i.status = 'pending'
         ORDER BY i.priority, i.available_at LIMIT 1)
        UNION ALL
        SELECT n.priority, n.available_at
        FROM firsts
        CROSS JOIN LATERAL (
            SELECT i.priority, i.available_at FROM items i
            WHERE i.lane = p_lane AND i.status = 'pending' AND i.priority > firsts.priority
            ORDER BY i.priority, i.available_at LIMIT 1
        ) AS n
    )
    INSERT INTO claim_floors AS c (lane, priority, floor, taken_at)
    SELECT p_lane, firsts.priority, least(firsts.available_at, now() - interval '1 second'), now()
    FROM firsts
    ON CONFLICT (tenant_id, lane, priority)
    DO UPDATE SET floor = excluded.floor, taken_at = excluded.taken_at;
    UPDATE claim_floors
    SET floor = now() - interval '1 second', taken_at = now()
    WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND lane = p_lane
      AND taken_at < now();
END
$body$
$f$;
    REVOKE ALL ON FUNCTION claim_floors_refresh(text) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_floors_refresh(text) TO %I', v_sys);

    -- The slots held, per scope key (spelt as keys_of spells it), counted
    -- from the claimed rows of the lane or of the limited kinds: the
    -- lane's key when it has a limit, each limited kind's, and each group's
    -- of a kind with a per-group limit. A statement of its own, so its
    -- snapshot is taken after the caller's locks. PL/pgSQL, not SQL: its
    -- plan is kept for the session, where a SQL function's query would be
    -- planned again on every call.
    EXECUTE $f$
CREATE FUNCTION claim_limited_held(p_lane text, p_lane_limit integer,
                                   p_kind_names text[], p_group_kinds text[],
                                   OUT keys text[], OUT ns integer[])
LANGUAGE plpgsql
SET search_path FROM CURRENT
-- The claimed set through its partial index (a scan that marks dead
-- entries as it passes them; a bitmap scan would not).
SET enable_bitmapscan = off
AS $body$
BEGIN
    SELECT coalesce(array_agg(k), '{}'), coalesce(array_agg(n), '{}') INTO keys, ns
    FROM (
        SELECT k, count(*)::integer AS n
        FROM items i
        CROSS JOIN LATERAL unnest(ARRAY[
            CASE WHEN p_lane_limit IS NOT NULL AND i.lane = p_lane THEN 'lane:' || i.lane END,
            CASE WHEN i.kind = ANY(p_kind_names) THEN 'kind:' || i.kind END,
            CASE WHEN i.group_key IS NOT NULL AND i.kind = ANY(p_group_kinds)
                 THEN 'group:' || i.kind || ':' || i.tenant_id || ':' || i.group_key END]) AS k
        WHERE i.status = 'claimed'
          AND (i.lane = p_lane OR i.kind = ANY(p_kind_names) OR i.kind = ANY(p_group_kinds))
          AND k IS NOT NULL
        GROUP BY k
    ) held;
END
$body$
$f$;
    REVOKE ALL ON FUNCTION claim_limited_held(text, integer, text[], text[]) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_limited_held(text, integer, text[], text[]) TO %I', v_sys);

    -- The fewest free slots, among the lane's limit and the limits of the
    -- kinds a claim of p_kinds (empty: every kind) may take, from the
    -- slots held now. Kinds no limit names: no bound.
    EXECUTE $f$
CREATE FUNCTION claim_limited_room(p_lane text, p_kinds text[], p_lane_limit integer,
                                   p_kind_names text[], p_kind_limits integer[])
RETURNS bigint
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_keys text[];
    v_ns   integer[];
BEGIN
    SELECT h.keys, h.ns INTO v_keys, v_ns
    FROM claim_limited_held(p_lane, p_lane_limit, p_kind_names, '{}') AS h;
    RETURN (
        SELECT coalesce(min(l.n - coalesce(v_ns[array_position(v_keys, l.k)], 0)),
                        9223372036854775807)
        FROM (
            SELECT 'lane:' || p_lane AS k, p_lane_limit::bigint AS n WHERE p_lane_limit IS NOT NULL
            UNION ALL
            SELECT 'kind:' || kn, kl FROM unnest(p_kind_names, p_kind_limits) AS u(kn, kl)
            WHERE cardinality(p_kinds) = 0 OR kn = ANY(p_kinds)
        ) AS l);
END
$body$
$f$;
    REVOKE ALL ON FUNCTION claim_limited_room(text, text[], integer, text[], integer[]) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_limited_room(text, text[], integer, text[], integer[]) TO %I', v_sys);

    EXECUTE format($f$
CREATE FUNCTION claim_limited(
    p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint, p_want bigint,
    p_lock text, p_lane_limit integer,
    p_kind_names text[], p_kind_limits integer[],
    p_group_kinds text[], p_group_limits integer[],
    p_ordered text[], p_hold text[])
RETURNS SETOF items
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_keys     text[];
    v_ns       integer[];
    v_full     text[] := '{}';
    v_ids      uuid[] := '{}';
    v_ckeys    text[] := '{}';
    v_left     bigint := p_want;
    v_admitted uuid[] := '{}';
    v_pos      integer;
    v_i        integer;
    v_free     boolean;
    v_k        text;
    v_cand     text[];
    v_lim      integer;
    v_grouped  boolean;
    v_gkeys    text[] := '{}';
    v_gns      integer[] := '{}';
    v_hashes   bigint[];
    f          record;
    c          record;
BEGIN
    -- Whether a per-group limit may apply: its keys come with candidates.
    v_grouped := cardinality(p_group_kinds) > 0
                 AND (cardinality(p_kinds) = 0 OR p_kinds && p_group_kinds);
    IF NOT v_grouped THEN
        -- Every key this claim can count against, in hash order.
        SELECT coalesce(array_agg(h ORDER BY h), '{}') INTO v_hashes
        FROM (SELECT DISTINCT hashtextextended(p_lock || k, 0) AS h
              FROM unnest(
                  CASE WHEN p_lane_limit IS NOT NULL THEN ARRAY['lane:' || p_lane] ELSE '{}' END
                  || ARRAY(SELECT 'kind:' || n FROM unnest(p_kind_names) AS n
                           WHERE cardinality(p_kinds) = 0 OR n = ANY(p_kinds))) AS k) AS keys;
        -- Locked before the read, so the read is exact.
        PERFORM count(pg_advisory_xact_lock(h)) FROM unnest(v_hashes) AS h;
        -- Room for the whole claim under every key: claim_items' own claim.
        IF claim_limited_room(p_lane, p_kinds, p_lane_limit, p_kind_names, p_kind_limits)
           >= p_limit THEN
            RETURN QUERY SELECT * FROM claim_items(p_lane, p_kinds, p_worker, p_lease, p_limit);
            RETURN;
        END IF;
    END IF;

    -- 1. The slots held as the claim begins.
    SELECT h.keys, h.ns INTO v_keys, v_ns
    FROM claim_limited_held(p_lane, p_lane_limit, p_kind_names, p_group_kinds) AS h;
    FOR v_pos IN 1 .. coalesce(array_length(v_keys, 1), 0) LOOP
        v_k := v_keys[v_pos];
        v_lim := CASE
            WHEN v_k LIKE 'lane:%%' THEN p_lane_limit
            WHEN v_k LIKE 'kind:%%' THEN p_kind_limits[array_position(p_kind_names, substr(v_k, 6))]
            ELSE p_group_limits[array_position(p_group_kinds, split_part(v_k, ':', 2))]
        END;
        IF v_lim IS NOT NULL AND v_ns[v_pos] >= v_lim THEN
            IF v_k LIKE 'lane:%%' THEN
                RETURN;
            END IF;
            v_full := v_full || v_k;
        END IF;
    END LOOP;
    -- 2. The candidates, stripe by stripe from each floor. The floors are
    -- refreshed as claim_items refreshes them (one claimer a second).
    IF NOT EXISTS (
        SELECT 1 FROM claim_floors
        WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND lane = p_lane
          AND taken_at > now() - interval '1 second'
    ) THEN
    IF pg_try_advisory_xact_lock(hashtext('drover.claim_floors'), hashtext(current_schema() || ':' || p_lane)) THEN
        PERFORM claim_floors_refresh(p_lane);
    END IF;
    END IF;
    FOR f IN
        SELECT cf.priority, cf.floor FROM claim_floors cf
        WHERE cf.tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND cf.lane = p_lane
        ORDER BY cf.priority
    LOOP
        FOR c IN
            SELECT i.id,
                   array_remove(ARRAY[
                       CASE WHEN p_lane_limit IS NOT NULL THEN 'lane:' || i.lane END,
                       CASE WHEN i.kind = ANY(p_kind_names) THEN 'kind:' || i.kind END,
                       CASE WHEN i.group_key IS NOT NULL AND i.kind = ANY(p_group_kinds)
                            THEN 'group:' || i.kind || ':' || i.tenant_id || ':' || i.group_key END],
                       NULL) AS keys,
                   CASE WHEN i.group_key IS NOT NULL AND i.kind = ANY(p_group_kinds)
                        THEN 'group:' || i.kind || ':' || i.tenant_id || ':' || i.group_key END AS gkey,
                   p_group_limits[array_position(p_group_kinds, i.kind)] AS glimit
            FROM items i
            WHERE i.status = 'pending'
              AND i.lane = p_lane
              AND i.priority = f.priority
              AND i.available_at >= f.floor
              AND i.available_at <= now()
              AND (cardinality(p_kinds) = 0 OR i.kind = ANY(p_kinds))
              AND NOT ('kind:' || i.kind = ANY(v_full))
              AND NOT (i.group_key IS NOT NULL
                       AND 'group:' || i.kind || ':' || i.tenant_id || ':' || i.group_key = ANY(v_full))
              -- An ordered group's item only as its group's head: no item of
              -- the same tenant, kind and group with a lower seq is pending,
              -- claimed, or failed under a hold (items_group_order holds only
              -- those).
              AND NOT (
                  i.group_key IS NOT NULL
                  AND i.kind = ANY(p_ordered)
                  AND EXISTS (
                      SELECT 1 FROM items e
                      WHERE e.tenant_id = i.tenant_id
                        AND e.kind = i.kind
                        AND e.group_key = i.group_key
                        AND e.seq < i.seq
                        AND e.status IN ('pending', 'claimed', 'failed')
                        AND (e.status <> 'failed' OR e.kind = ANY(p_hold))))
            ORDER BY i.available_at
            LIMIT v_left
        LOOP
            -- No more of a group than its limit could ever admit: the
            -- rest of its backlog is read past, not carried to admission.
            IF c.gkey IS NOT NULL THEN
                v_pos := array_position(v_gkeys, c.gkey);
                IF v_pos IS NULL THEN
                    v_gkeys := v_gkeys || c.gkey;
                    v_gns := v_gns || 1;
                ELSIF v_gns[v_pos] >= c.glimit THEN
                    CONTINUE;
                ELSE
                    v_gns[v_pos] := v_gns[v_pos] + 1;
                END IF;
            END IF;
            v_ids := v_ids || c.id;
            -- Each candidate's keys as one string (keys hold no NUL).
            v_ckeys := v_ckeys || array_to_string(c.keys, chr(1));
            v_left := v_left - 1;
        END LOOP;
        EXIT WHEN v_left <= 0;
    END LOOP;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    IF v_grouped THEN
    -- 3. The scope locks, in hash order.
    PERFORM count(pg_advisory_xact_lock(h))
    FROM (SELECT DISTINCT hashtextextended(p_lock || k, 0) AS h
          FROM unnest(v_ckeys) AS ck, unnest(string_to_array(ck, chr(1))) AS k
          WHERE k <> ''
          ORDER BY 1) AS locks;

    -- 4. The held slots after the locks.
    SELECT h.keys, h.ns INTO v_keys, v_ns
    FROM claim_limited_held(p_lane, p_lane_limit, p_kind_names, p_group_kinds) AS h;
    END IF;

    -- Admission in claim order.
    FOR v_i IN 1 .. cardinality(v_ids) LOOP
        EXIT WHEN cardinality(v_admitted) >= p_limit;
        v_cand := string_to_array(v_ckeys[v_i], chr(1));
        v_free := true;
        FOREACH v_k IN ARRAY coalesce(v_cand, '{}') LOOP
            CONTINUE WHEN v_k = '';
            v_lim := CASE
                WHEN v_k LIKE 'lane:%%' THEN p_lane_limit
                WHEN v_k LIKE 'kind:%%' THEN p_kind_limits[array_position(p_kind_names, substr(v_k, 6))]
                ELSE p_group_limits[array_position(p_group_kinds, split_part(v_k, ':', 2))]
            END;
            IF coalesce(v_ns[array_position(v_keys, v_k)], 0) >= v_lim THEN
                v_free := false;
                EXIT;
            END IF;
        END LOOP;
        CONTINUE WHEN NOT v_free;
        FOREACH v_k IN ARRAY coalesce(v_cand, '{}') LOOP
            CONTINUE WHEN v_k = '';
            v_pos := array_position(v_keys, v_k);
            IF v_pos IS NULL THEN
                v_keys := v_keys || v_k;
                v_ns := v_ns || 1;
            ELSE
                v_ns[v_pos] := v_ns[v_pos] + 1;
            END IF;
        END LOOP;
        v_admitted := v_admitted || v_ids[v_i];
    END LOOP;

    -- 5. The admitted, claimed as claim_items claims them: those still
    -- pending, and not locked by another writer (skipped, never waited
    -- for).
    RETURN QUERY
    WITH picked AS (
        SELECT p.id FROM items p
        WHERE p.id = ANY(v_admitted) AND p.status = 'pending'
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
$body$
$f$, v_sys);
    REVOKE ALL ON FUNCTION claim_limited(text, text[], text, float8, bigint, bigint, text, integer,
        text[], integer[], text[], integer[], text[], text[]) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_limited(text, text[], text, float8, bigint, bigint, text, integer,
        text[], integer[], text[], integer[], text[], text[]) TO %I', v_sys);

    f := 'claim_limited(text, text[], text, float8, bigint, bigint, text, integer, '
         'text[], integer[], text[], integer[], text[], text[])';
    EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_bitmapscan = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_sort = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_hashjoin = off', f);
    EXECUTE format('ALTER FUNCTION %s SET enable_mergejoin = off', f);
    -- A disabled method still serves where nothing else can (the sort of
    -- the lock keys), at a cost of 1e10 that would start the JIT compiler
    -- on every call: 97 ms of a 1 ms claim.
    EXECUTE format('ALTER FUNCTION %s SET jit = off', f);
END
$do$;

-- drover 0050: a handover claims the freed group's next item first
-- (docs/flow-control.md, "The slot").
--
-- complete_then_claim (0045) ran claim_limited after the completions: the
-- whole limited claim (the held slots counted twice, the floors, a walk of
-- the lane in claim order past every full group's backlog, admission).
-- Under a binding per-group limit the slot a completion frees belongs to
-- one known group, and that group's next item is what the handover
-- should take: 0.57 ms of a 0.84 ms handover was the claim's search.
--
-- items_group_next: a group's pending items in claim order, so a freed
-- group's next item is one index descent. Only items with a group have
-- an entry (an ungrouped enqueue writes nothing more).
--
-- claim_limited_next: the limited claim of given candidates (steps 3 to 5
-- of claim_limited, which now ends in a call to it): every scope key of
-- every candidate locked in one statement in hash order and the held
-- slots counted after the locks (unless the caller took the locks first
-- and passes its count), admission in the order given, one UPDATE of
-- those still pending, skipping rows another writer holds. So the
-- handover admits nothing claim_limited would not: same keys, same
-- locks, same count, the same code.
--
-- complete_then_claim now: the completions as before, and their groups
-- (those of the claim's lane and kinds a per-group limit applies to);
-- for each such group its next item (an ordered group: its head, as
-- claim_limited's probe defines it), unless an item of a better priority
-- is due in the lane (then claim_limited orders them); those candidates
-- through claim_limited_next. With no candidate (the groups' backlogs are
-- empty, or not due) no lock was taken, and claim_limited runs as before.
-- With candidates, its answer is the handover's, short or not: taking
-- claim_limited's locks after these could wait in a cycle with another
-- claimer's, and a short answer costs the worker one ordinary claim.
--
-- claim_limited's last step (and claim_limited_next's) locks the admitted
-- ids before the UPDATE. Written `WHERE p.id = ANY(v_admitted) AND
-- p.status = 'pending'`, the generic plan the function keeps walked a
-- pending-items index (items_fair) and filtered every pending row by id:
-- 2,396 rows read past for one claimed in `drover bench --limits`' binding
-- part, 0.34 ms of that statement's 0.45 ms, and growing with the whole
-- installation's backlog (the plan is made once per session, from the
-- statistics of that moment). Each id is now looked up alone, by the
-- primary key; claim_limited is otherwise 0036's, its steps 3 to 5 moved
-- into claim_limited_next.
--
-- Within one priority, a freed group's next item may go before an older
-- item of a group that has a free slot: the handover fills the slot its
-- completion freed, and the worker's next claim takes the older item.

CREATE INDEX items_group_next ON items (tenant_id, kind, group_key, priority, available_at)
    WHERE status = 'pending' AND group_key IS NOT NULL;

DO $do$
DECLARE
    v_sys text;
    f     text;
    g     text := 'claim_limited_next(uuid[], text[], text[], integer[], text, text, float8, '
                  'bigint, text, integer, '
                  'text[], integer[], text[], integer[])';
    o     text;
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();

    EXECUTE format($f$
CREATE FUNCTION claim_limited_next(
    p_ids uuid[], p_ckeys text[], p_keys text[], p_ns integer[],
    p_lane text, p_worker text, p_lease float8, p_limit bigint,
    p_lock text, p_lane_limit integer,
    p_kind_names text[], p_kind_limits integer[],
    p_group_kinds text[], p_group_limits integer[])
RETURNS SETOF items
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_keys     text[] := p_keys;
    v_ns       integer[] := p_ns;
    v_ckeys    text[] := p_ckeys;
    v_cand     text[];
    v_admitted uuid[] := '{}';
    v_free     boolean;
    v_k        text;
    v_lim      integer;
    v_pos      integer;
    v_i        integer;
BEGIN
    -- Each candidate's scope keys as one string (keys hold no NUL), in
    -- the order given, unless the caller has them.
    IF v_ckeys IS NULL THEN
        SELECT coalesce(array_agg(array_to_string(array_remove(ARRAY[
                   CASE WHEN p_lane_limit IS NOT NULL THEN 'lane:' || i.lane END,
                   CASE WHEN i.kind = ANY(p_kind_names) THEN 'kind:' || i.kind END,
                   CASE WHEN i.group_key IS NOT NULL AND i.kind = ANY(p_group_kinds)
                        THEN 'group:' || i.kind || ':' || i.tenant_id || ':' || i.group_key END],
                   NULL), chr(1)) ORDER BY u.ord), '{}')
        INTO v_ckeys
        FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
        JOIN items i ON i.id = u.id;
    END IF;

    -- Unless the caller holds every key's lock and counted after taking
    -- them (p_keys/p_ns given): the scope locks, in hash order
    -- (claim_limited's step 3), and the held slots after them (step 4).
    IF v_keys IS NULL THEN
        PERFORM count(pg_advisory_xact_lock(h))
        FROM (SELECT DISTINCT hashtextextended(p_lock || k, 0) AS h
              FROM unnest(v_ckeys) AS ck, unnest(string_to_array(ck, chr(1))) AS k
              WHERE k <> ''
              ORDER BY 1) AS locks;
        SELECT h.keys, h.ns INTO v_keys, v_ns
        FROM claim_limited_held(p_lane, p_lane_limit, p_kind_names, p_group_kinds) AS h;
    END IF;

    -- Admission in the order given.
    FOR v_i IN 1 .. cardinality(v_ckeys) LOOP
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
        v_admitted := v_admitted || p_ids[v_i];
    END LOOP;

    -- The admitted that are still pending (step 5).
    RETURN QUERY
    WITH picked AS (
        SELECT p.id FROM unnest(v_admitted) AS a(id)
        CROSS JOIN LATERAL (
            SELECT q.id FROM items q
            WHERE q.id = a.id AND q.status = 'pending'
            FOR UPDATE SKIP LOCKED
        ) AS p
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
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', g);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', g, v_sys);

    -- claim_limited (0036) as it was, but for its last steps (see above).
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION claim_limited(
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
    v_pos      integer;
    v_k        text;
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

    -- 3. to 5. (claim_limited_next): with a per-group limit, the scope
    -- locks and the held slots after them; then admission in claim order
    -- and the claim of the admitted still pending. Without one, the locks
    -- were taken first and step 1's count is exact.
    RETURN QUERY
    SELECT * FROM claim_limited_next(
        v_ids, v_ckeys,
        CASE WHEN v_grouped THEN NULL ELSE v_keys END,
        CASE WHEN v_grouped THEN NULL ELSE v_ns END,
        p_lane, p_worker, p_lease, p_limit, p_lock, p_lane_limit,
        p_kind_names, p_kind_limits, p_group_kinds, p_group_limits);
END
$body$
$f$, v_sys);

    EXECUTE format($f$
CREATE OR REPLACE FUNCTION complete_then_claim(
    p_tenant uuid, p_ids uuid[], p_tokens uuid[], p_results jsonb[],
    p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint, p_want bigint,
    p_lock text, p_lane_limit integer,
    p_kind_names text[], p_kind_limits integer[],
    p_group_kinds text[], p_group_limits integer[],
    p_ordered text[], p_hold text[])
RETURNS TABLE (landed uuid[], claimed items)
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
SET drover.tenant_id = ''
AS $body$
DECLARE
    v_landed uuid[];
    v_gkinds text[];
    v_gkeys  text[];
    v_next   uuid[];
    v_prio   integer;
    v_any    boolean := false;
    c        items;
BEGIN
    -- The triggers on items see the tenant as under complete_items.
    PERFORM set_config('drover.tenant_id', p_tenant::text, true);
    WITH done AS (
        UPDATE items
        SET status = 'done', claim_token = NULL, claimed_by = NULL, lease_expires_at = NULL,
            result = d.result,
            updated_at = now(), updated_by = '00000000-0000-0000-0000-000000000000'::uuid
        FROM unnest(p_ids, p_tokens, p_results) AS d(id, token, result)
        WHERE items.id = d.id
          AND items.tenant_id = p_tenant
          AND items.claim_token = d.token
          AND items.lease_expires_at > now()
        RETURNING items.id, items.lane, items.kind, items.group_key
    )
    SELECT coalesce(array_agg(id), '{}'),
           -- The groups whose slots the completions freed, one entry per
           -- slot: those the claim may take from.
           coalesce(array_agg(kind) FILTER (WHERE lane = p_lane AND group_key IS NOT NULL
                        AND kind = ANY(p_group_kinds)
                        AND (cardinality(p_kinds) = 0 OR kind = ANY(p_kinds))), '{}'),
           coalesce(array_agg(group_key) FILTER (WHERE lane = p_lane AND group_key IS NOT NULL
                        AND kind = ANY(p_group_kinds)
                        AND (cardinality(p_kinds) = 0 OR kind = ANY(p_kinds))), '{}')
    INTO v_landed, v_gkinds, v_gkeys
    FROM done;
    PERFORM set_config('drover.tenant_id', '', true);

    IF cardinality(v_gkinds) > 0 THEN
        -- Each freed group's next items, as many as it freed slots: an
        -- ordered group's head only (claim_limited's probe: its first
        -- entry that is pending, claimed or failed under a hold), any
        -- other group's first pending items in claim order.
        WITH g AS (
            SELECT k, gk, count(*) AS slots
            FROM unnest(v_gkinds, v_gkeys) AS u(k, gk)
            GROUP BY k, gk
        ), n AS (
            SELECT x.id, x.priority, x.available_at
            FROM g
            CROSS JOIN LATERAL (
                SELECT i.id, i.priority, i.available_at FROM items i
                WHERE i.tenant_id = p_tenant AND i.kind = g.k AND i.group_key = g.gk
                  AND i.status = 'pending' AND i.lane = p_lane AND i.available_at <= now()
                ORDER BY i.priority, i.available_at
                LIMIT g.slots
            ) AS x
            WHERE NOT (g.k = ANY(p_ordered))
            UNION ALL
            SELECT h.id, h.priority, h.available_at
            FROM g
            CROSS JOIN LATERAL (
                SELECT e.id, e.priority, e.available_at, e.status, e.lane FROM items e
                WHERE e.tenant_id = p_tenant AND e.kind = g.k AND e.group_key = g.gk
                  AND e.status IN ('pending', 'claimed', 'failed')
                  AND (e.status <> 'failed' OR e.kind = ANY(p_hold))
                ORDER BY e.seq
                LIMIT 1
            ) AS h
            WHERE g.k = ANY(p_ordered)
              AND h.status = 'pending' AND h.lane = p_lane AND h.available_at <= now()
        )
        SELECT coalesce(array_agg(n.id ORDER BY n.priority, n.available_at, n.id), '{}'),
               min(n.priority)
        INTO v_next, v_prio
        FROM n;
        -- An item of a better priority due in the lane goes first: the
        -- whole claim orders them.
        IF cardinality(v_next) > 0 AND NOT EXISTS (
            SELECT 1 FROM items b
            WHERE b.status = 'pending' AND b.lane = p_lane AND b.priority < v_prio
              AND b.available_at <= now()
              AND (cardinality(p_kinds) = 0 OR b.kind = ANY(p_kinds))
        ) THEN
            FOR c IN
                SELECT * FROM claim_limited_next(v_next, NULL, NULL, NULL,
                                                 p_lane, p_worker, p_lease, p_limit,
                                                 p_lock, p_lane_limit, p_kind_names, p_kind_limits,
                                                 p_group_kinds, p_group_limits)
            LOOP
                v_any := true;
                landed := v_landed;
                claimed := c;
                RETURN NEXT;
            END LOOP;
            IF NOT v_any THEN
                landed := v_landed;
                claimed := NULL;
                RETURN NEXT;
            END IF;
            RETURN;
        END IF;
    END IF;

    FOR c IN
        SELECT * FROM claim_limited(p_lane, p_kinds, p_worker, p_lease, p_limit, p_want,
                                    p_lock, p_lane_limit, p_kind_names, p_kind_limits,
                                    p_group_kinds, p_group_limits, p_ordered, p_hold)
    LOOP
        v_any := true;
        landed := v_landed;
        claimed := c;
        RETURN NEXT;
    END LOOP;
    IF NOT v_any THEN
        landed := v_landed;
        claimed := NULL;
        RETURN NEXT;
    END IF;
END
$body$
$f$, v_sys);

    -- As claim_limited: one generic plan per session that walks the
    -- indexes, and no JIT compilation. CREATE OR REPLACE dropped the
    -- settings 0045 gave complete_then_claim: they are given again.
    f := 'complete_then_claim(uuid, uuid[], uuid[], jsonb[], text, text[], text, '
         'float8, bigint, bigint, text, integer, text[], integer[], text[], '
         'integer[], text[], text[])';
    FOREACH o IN ARRAY ARRAY[f, g, 'claim_limited(text, text[], text, float8, bigint, bigint, text, '
                                 'integer, text[], integer[], text[], integer[], text[], text[])'] LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_generic_plan', o);
        EXECUTE format('ALTER FUNCTION %s SET enable_seqscan = off', o);
        EXECUTE format('ALTER FUNCTION %s SET enable_bitmapscan = off', o);
        EXECUTE format('ALTER FUNCTION %s SET enable_sort = off', o);
        EXECUTE format('ALTER FUNCTION %s SET enable_hashjoin = off', o);
        EXECUTE format('ALTER FUNCTION %s SET enable_mergejoin = off', o);
        EXECUTE format('ALTER FUNCTION %s SET jit = off', o);
    END LOOP;
END
$do$;

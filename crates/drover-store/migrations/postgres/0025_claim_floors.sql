-- drover 0025: claim floors, so a claim never walks the dead entries of the
-- items it claimed before.
--
-- The claim walks items_claim (lane, priority, available_at) of pending rows
-- from its first entry. Every claim leaves the entry of the row's pending
-- version behind; a scan marks such an entry dead, and skips it for free,
-- only once the version is dead to every transaction. While one snapshot is
-- held open anywhere in the cluster (a forgotten BEGIN, a long report, a
-- replica's hot_standby_feedback) that never happens, so every claim re-read
-- the entries of every item claimed since the snapshot was taken: 800 items/s
-- for five minutes is 240,000 entries, each a heap visit, per claim.
--
-- A floor per (lane, priority) stripe bounds the walk: every pending row of
-- the stripe that the last refresh could see has available_at >= floor, so
-- the claim starts its index range there. A refresh (at most one a second
-- per lane, by whichever claimer finds the floors stale, the others skip)
-- reads each stripe's first pending entry (one walk, instead of one per
-- claim) and sets floor = least(that entry's available_at, now() - 1 s).
--
-- Why the second: a row that becomes visible after a refresh with
-- available_at below the floor (an enqueue in a transaction that began
-- before it, or an explicit time in the past) is not claimed by a floored
-- scan. The margin covers transactions shorter than a second; a longer one's
-- rows wait for the next refresh (at most a second later), which reads the
-- stripe from its start again and lowers the floor to them. Nothing is
-- skipped for longer than one refresh interval, and every path that makes an
-- item pending again (release, defer, retry, the stale requeue) sets
-- available_at to now() or later, above any floor.
--
-- A new stripe gets its row from the insert trigger below (at floor
-- -infinity, refreshed by the next claim), so a priority first used on a busy
-- lane is claimed in order at once; a refresh also finds stripes without a
-- row (a loose scan of the index), which covers rows inserted while this
-- migration ran.
--
-- The table carries no tenant data (a lane, a priority, two times): its rows
-- belong to the nil tenant, like lane_states. The runtime role may only add
-- nil-tenant rows (the trigger runs as the inserting role); the claim and
-- the refresh run as the system role. Updates touch no indexed column, so
-- they are HOT and pruned without vacuum.

CREATE TABLE claim_floors (
    tenant_id uuid        NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
    lane      text        NOT NULL,
    priority  smallint    NOT NULL,
    floor     timestamptz NOT NULL DEFAULT '-infinity',
    taken_at  timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (tenant_id, lane, priority)
) WITH (fillfactor = 50);

ALTER TABLE claim_floors ENABLE ROW LEVEL SECURITY;
ALTER TABLE claim_floors FORCE ROW LEVEL SECURITY;

DO $do$
DECLARE
    v_rt  text;
    v_sys text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format($q$CREATE POLICY claim_floors_runtime ON claim_floors FOR INSERT TO %I
                      WITH CHECK (tenant_id = '00000000-0000-0000-0000-000000000000'::uuid)$q$, v_rt);
    EXECUTE format('CREATE POLICY claim_floors_system ON claim_floors TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT INSERT ON claim_floors TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON claim_floors TO %I', v_sys);

    -- The claim: as 0003's, one stripe at a time in priority order, each
    -- from its floor. Dropped and created (a function whose SET clause names
    -- a role cannot be replaced), with this installation's system role.
    DROP FUNCTION claim_items(text, text[], text, float8, bigint);
    EXECUTE format($f$
CREATE FUNCTION claim_items(p_lane text, p_kinds text[], p_worker text, p_lease float8, p_limit bigint)
RETURNS SETOF items
LANGUAGE plpgsql
SET role = %I
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_left bigint := p_limit;
    v_n    bigint;
    f      record;
BEGIN
    -- Refresh the lane's floors when they are a second old (or the lane has
    -- none): one claimer per lane does it, under a transaction-scoped lock
    -- the others do not wait for.
    -- Two IFs: SQL does not promise to evaluate AND left to right, and the
    -- lock is wanted only when a refresh is due.
    IF NOT EXISTS (
        SELECT 1 FROM claim_floors
        WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND lane = p_lane
          AND taken_at > now() - interval '1 second'
    ) THEN
    IF pg_try_advisory_xact_lock(hashtext('drover.claim_floors'), hashtext(current_schema() || ':' || p_lane)) THEN
        -- Each stripe's first pending entry: a loose scan, one index descent
        -- per priority present.
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
        -- Stripes with nothing pending: the floor trails the clock.
        UPDATE claim_floors
        SET floor = now() - interval '1 second', taken_at = now()
        WHERE tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND lane = p_lane
          AND taken_at < now();
    END IF;
    END IF;

    FOR f IN
        SELECT c.priority, c.floor FROM claim_floors c
        WHERE c.tenant_id = '00000000-0000-0000-0000-000000000000'::uuid AND c.lane = p_lane
        ORDER BY c.priority
    LOOP
        RETURN QUERY
        WITH picked AS (
            SELECT i.id
            FROM items i
            WHERE i.status = 'pending'
              AND i.lane = p_lane
              AND i.priority = f.priority
              AND i.available_at >= f.floor
              AND i.available_at <= now()
              AND (cardinality(p_kinds) = 0 OR i.kind = ANY(p_kinds))
            ORDER BY i.available_at
            LIMIT v_left
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
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_left := v_left - v_n;
        EXIT WHEN v_left <= 0;
    END LOOP;
END
$body$
$f$, v_sys);
    REVOKE ALL ON FUNCTION claim_items(text, text[], text, float8, bigint) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_items(text, text[], text, float8, bigint) TO %I', v_sys);
END
$do$;

-- Wake-ups as 0022's, and each inserted (lane, priority) stripe gets its
-- floor row, so the claim knows the stripe at once. The row exists after the
-- first item of a stripe, and ON CONFLICT DO NOTHING then only probes the
-- primary key: no write.
-- The function now names a table, so its search_path is fixed to this schema
-- (a trigger otherwise runs with the inserting session's).
CREATE OR REPLACE FUNCTION items_wake() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    INSERT INTO claim_floors (lane, priority)
    SELECT DISTINCT lane, priority FROM new_rows
    ON CONFLICT DO NOTHING;
    PERFORM pg_notify('drover_wake', TG_TABLE_SCHEMA || ':' || lane || '#' || txid_current())
    FROM (SELECT DISTINCT lane FROM new_rows) AS lanes;
    RETURN NULL;
END $$;

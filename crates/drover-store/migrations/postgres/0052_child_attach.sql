-- drover 0052: items children are made beside items, then attached.
--
-- 0026's items_children_make ran CREATE TABLE ... PARTITION OF items, which
-- holds an ACCESS EXCLUSIVE lock on items from the create to the commit:
-- the child's files, its dozen index builds (each ends in a file sync) and
-- its grants all happened while every claim, completion and enqueue
-- waited. The soak's wait record showed them waiting on Lock:relation for
-- 110-170 ms behind item_children_make's IO:DataFileImmediateSync, at
-- every child (one per quarter of the retention).
--
-- Now a child is made in two transactions:
--   items_child_prepare  makes each missing window's table, items_p<ms>, as
--                        a plain table shaped like items (LIKE items
--                        INCLUDING ALL: its columns, defaults, constraints
--                        and every index), with its row-level security and
--                        grants. It takes no lock a claim waits on (ACCESS
--                        SHARE on items).
--   items_child_attach   attaches one and names it items_c<ms> (so the
--                        sweep's drop of detached children, which looks for
--                        items_c tables that are no partition, never takes
--                        a prepared one): SHARE UPDATE EXCLUSIVE on items
--                        (claims, completions and enqueues go on), ACCESS
--                        EXCLUSIVE on the new table (nobody uses it yet: it
--                        is made ahead of the clock) and on items_default
--                        for the attach's catalog work and its check that
--                        the default partition holds no row of the window
--                        (the default partition is small; a row of the
--                        window there refuses the attach, and the prepared
--                        table is dropped, as 0026 skipped the window).
-- A table prepared but not attached (a lock timeout, a stopped process) is
-- attached by the next pass, which finds it by name: windows follow the
-- last child's end, and the first child starts on a multiple of the width
-- (0026 started it at the pass's now()), so both passes name it alike.
--
-- items_children_make stays for a worker of the previous release.

DO $do$
DECLARE
    v_sys text;
BEGIN
    SELECT system_role INTO v_sys FROM drover_roles();

    EXECUTE format($f$
CREATE FUNCTION items_child_prepare(p_from timestamptz, p_to timestamptz, p_width interval,
                                    OUT name text, OUT lo uuid, OUT hi uuid)
RETURNS SETOF record
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_lo    timestamptz;
    v_hi    timestamptz;
    v_last  timestamptz;
    v_stale text;
BEGIN
    IF p_width < interval '1 second' THEN
        RAISE EXCEPTION 'child width %% is below a second', p_width USING ERRCODE = '22023';
    END IF;
    SELECT max(c.hi) INTO v_last FROM items_children() c;
    -- Past the last child, windows start on a multiple of the width, so a
    -- pass that prepared one and stopped before the attach names it as the
    -- next pass will (a later now() in the same width gives the same
    -- window).
    v_lo := to_timestamp(floor(extract(epoch FROM p_from) / extract(epoch FROM p_width))
                         * extract(epoch FROM p_width));
    v_lo := greatest(v_lo, coalesce(v_last, v_lo));
    WHILE v_lo < p_to LOOP
        v_hi := v_lo + p_width;
        name := 'items_p' || lpad(to_hex((extract(epoch FROM v_lo) * 1000)::bigint), 12, '0');
        lo := items_time_id(v_lo);
        hi := items_time_id(v_hi);
        IF to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE TABLE %%I (LIKE items INCLUDING ALL) WITH (
                fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01,
                autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,
                autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false)', name);
            EXECUTE format('ALTER TABLE %%I ENABLE ROW LEVEL SECURITY', name);
            EXECUTE format('ALTER TABLE %%I FORCE ROW LEVEL SECURITY', name);
            EXECUTE format('CREATE POLICY items_system ON %%I TO %%I USING (true) WITH CHECK (true)', name, %L);
            EXECUTE format('GRANT SELECT ON %%I TO %%I', name, %L);
        END IF;
        RETURN NEXT;
        v_lo := v_hi;
    END LOOP;
    -- A prepared table whose window began before the first one asked for
    -- now (the width changed, or its window passed while unattached) will
    -- never be attached: it is empty, and goes.
    FOR v_stale IN
        SELECT c.relname FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^items_p[0-9a-f]{12}$'
          AND c.relname < 'items_p' || lpad(to_hex((extract(epoch FROM
                greatest(p_from - p_width, coalesce(v_last, p_from - p_width))) * 1000)::bigint), 12, '0')
    LOOP
        EXECUTE format('DROP TABLE %%I', v_stale);
    END LOOP;
END
$body$
$f$, v_sys, v_sys);
    REVOKE ALL ON FUNCTION items_child_prepare(timestamptz, timestamptz, interval) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION items_child_prepare(timestamptz, timestamptz, interval) TO %I', v_sys);

    -- Attaches one prepared table; false (and the table dropped) when the
    -- default partition holds a row of its window. Only a table named as a
    -- child and not yet anyone's partition is touched.
    EXECUTE $f$
CREATE FUNCTION items_child_attach(p_name text, p_lo uuid, p_hi uuid)
RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_child text := 'items_c' || substr(p_name, 8);
BEGIN
    IF p_name !~ '^items_p[0-9a-f]{12}$' THEN
        RAISE EXCEPTION 'not a prepared items child: %', p_name USING ERRCODE = '22023';
    END IF;
    IF to_regclass(p_name) IS NULL THEN
        -- Attached by another pass since this one prepared it.
        RETURN to_regclass(v_child) IS NOT NULL;
    END IF;
    BEGIN
        EXECUTE format('ALTER TABLE items ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                       p_name, p_lo, p_hi);
    EXCEPTION WHEN check_violation THEN
        -- The default partition holds a row of this window.
        EXECUTE format('DROP TABLE %I', p_name);
        RETURN false;
    END;
    EXECUTE format('ALTER TABLE %I RENAME TO %I', p_name, v_child);
    PERFORM items_child_index_names(v_child);
    RETURN true;
END
$body$
$f$;
    REVOKE ALL ON FUNCTION items_child_attach(text, uuid, uuid) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION items_child_attach(text, uuid, uuid) TO %I', v_sys);
END
$do$;

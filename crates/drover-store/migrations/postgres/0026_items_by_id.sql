-- drover 0026: items range-partitioned by id, so purge by retention drops
-- whole children instead of deleting row by row (docs/design.md, "Why will
-- the hot table not bloat?").
--
-- Ids are UUIDv7: the first 48 bits are the creation time in milliseconds,
-- so id order is creation order and a range of ids is a range of creation
-- times. Each child holds the items created in one window (its width,
-- derived from the retention by the sweep). A child whose window ended
-- before the retention cutoff, and whose rows are all final and older than
-- the cutoff, is detached and dropped: no dead tuple, no vacuum, no index
-- entry left behind. The few rows of such a child that must stay (pending,
-- claimed, or final but younger than the cutoff) move to the default
-- partition first, under the same exclusive lock (the sweep's rotation,
-- store/postgres/rotate.rs).
--
-- The partitions:
--   items_legacy   the table as it was before this migration: every id below
--                  the cutoff taken now. Rotated like any child.
--   items_c<ms>    one window of creation times, made ahead by the sweep.
--   items_default  ids outside every child: ids a producer minted that are
--                  not time-ordered, ids from a clock ahead of the windows,
--                  survivors of dropped children. Purged row by row; it
--                  stays small.
--
-- What the partitioning costs and how it is paid:
--   * The primary key stays global (it is the partition key), so an id
--     collision is still one probe and ON CONFLICT DO NOTHING still works.
--   * A unique index must include the partition key, so (tenant, key) can
--     no longer be unique in items itself. item_keys holds each live key
--     once, globally unique; a BEFORE INSERT trigger (keyed rows only, by
--     its WHEN clause: an unkeyed insert does not call it) claims the key
--     there and skips the item row when another live item holds it. That
--     keeps ON CONFLICT DO NOTHING's contract for keys: the row is not
--     inserted and not returned. A key row whose item is gone (purged, or
--     an insert that lost on its id after taking the key) is stale and is
--     taken over; the sweep deletes stale key rows of dropped children.
--   * Creating or dropping a child is DDL, which the runtime and system
--     roles may not do: two SECURITY DEFINER functions below do exactly
--     that and nothing else, for the system role only.
--
-- Runs in one transaction, holding items exclusively throughout (a rename
-- and an attach); at a production size the index built on items_legacy for
-- the keys takes the longest.

-- The first id of time t's millisecond: UUIDv7 puts the milliseconds since
-- the epoch in the first 48 bits.
CREATE FUNCTION items_time_id(t timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE
AS $$ SELECT (lpad(to_hex(floor(extract(epoch FROM t) * 1000)::bigint), 12, '0')
              || '00000000000000000000')::uuid $$;

-- The range children of items and their windows, oldest first (the legacy
-- child's window has no start). Read from the catalog, so nothing has to be
-- kept in step with the DDL.
CREATE FUNCTION items_children(OUT name text, OUT lo timestamptz, OUT hi timestamptz,
                               OUT lo_id uuid, OUT hi_id uuid)
RETURNS SETOF record LANGUAGE sql STABLE
SET search_path FROM CURRENT
AS $$
    SELECT b.name, to_timestamp(('x' || substr(replace(b.lo_id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0),
           to_timestamp(('x' || substr(replace(b.hi_id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0),
           b.lo_id, b.hi_id
    FROM (
        SELECT c.relname::text AS name,
               substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$FROM \('([0-9a-f-]{36})'\)$r$)::uuid AS lo_id,
               substring(pg_get_expr(c.relpartbound, c.oid) FROM $r$TO \('([0-9a-f-]{36})'\)$r$)::uuid AS hi_id
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'items'::regclass
          AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
    ) AS b
    ORDER BY b.hi_id
$$;

DROP TRIGGER items_wake ON items;
ALTER TABLE items RENAME TO items_legacy;
ALTER INDEX items_pkey RENAME TO items_legacy_pkey;
ALTER INDEX items_claim RENAME TO items_legacy_claim;
ALTER INDEX items_tenant_stale RENAME TO items_legacy_tenant_stale;
ALTER INDEX items_final RENAME TO items_legacy_final;
ALTER INDEX items_stopped_list RENAME TO items_legacy_stopped_list;
-- Unique per partition only now; item_keys carries the uniqueness.
DROP INDEX items_tenant_key;

CREATE TABLE items (LIKE items_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (id);
ALTER TABLE items ADD CONSTRAINT items_pkey PRIMARY KEY (id);
-- The indexes of 0001 and 0020, now partitioned: each child has its own.
CREATE INDEX items_claim ON items (lane, priority, available_at) WHERE status = 'pending';
CREATE INDEX items_tenant_stale ON items (tenant_id, lease_expires_at) WHERE status = 'claimed';
CREATE INDEX items_final ON items (status, updated_at) WHERE status IN ('done', 'failed', 'cancelled');
CREATE INDEX items_stopped_list ON items (status, id) WHERE status IN ('failed', 'cancelled');
-- Lookups by key (the collision after a refused insert, get by key).
CREATE INDEX items_tenant_key ON items (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- The storage settings of 0001 on every child, and no tail truncation by
-- vacuum: it takes an exclusive lock, and every claim reads every child, so
-- one truncation stalled every claim (docs/performance.md, "Then with VACUUM
-- (TRUNCATE false)"). Space comes back when a child is dropped.
CREATE TABLE items_default PARTITION OF items DEFAULT WITH (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 1,
    vacuum_truncate = false
);
ALTER TABLE items_legacy SET (vacuum_truncate = false);

-- The legacy rows: those at or past the cutoff (ids that are not time
-- ordered, mostly) go to the default partition, the rest stay and the table
-- is attached below the cutoff. The CHECK lets the attach skip its scan.
DO $do$
DECLARE
    v_cut uuid := items_time_id(clock_timestamp());
BEGIN
    INSERT INTO items_default SELECT * FROM items_legacy WHERE id >= v_cut;
    DELETE FROM items_legacy WHERE id >= v_cut;
    EXECUTE format('ALTER TABLE items_legacy ADD CONSTRAINT items_legacy_below CHECK (id < %L::uuid)', v_cut);
    EXECUTE format('ALTER TABLE items ATTACH PARTITION items_legacy FOR VALUES FROM (MINVALUE) TO (%L)', v_cut);
    ALTER TABLE items_legacy DROP CONSTRAINT items_legacy_below;
END
$do$;

-- A child's indexes named after the parent's: items_claim's entry on
-- items_c0123 is items_c0123_claim (PostgreSQL would make up
-- items_c0123_lane_priority_available_at_idx), so plans and catalogs read
-- the same on every child.
CREATE FUNCTION items_child_index_names(p_child text) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT ci.relname AS child_index, pi.relname AS parent_index
        FROM pg_catalog.pg_index x
        JOIN pg_catalog.pg_class ci ON ci.oid = x.indexrelid
        JOIN pg_catalog.pg_inherits i ON i.inhrelid = ci.oid
        JOIN pg_catalog.pg_class pi ON pi.oid = i.inhparent
        WHERE x.indrelid = p_child::regclass AND pi.relname <> 'items_pkey'
    LOOP
        IF r.child_index <> p_child || substr(r.parent_index, 6) THEN
            EXECUTE format('ALTER INDEX %I RENAME TO %I', r.child_index,
                           p_child || substr(r.parent_index, 6));
        END IF;
    END LOOP;
END $$;

SELECT items_child_index_names('items_default');
SELECT items_child_index_names('items_legacy');

-- Live idempotency keys, one row each: the uniqueness items can no longer
-- hold. Written by the trigger below (one insert per keyed item), deleted
-- by the sweep when the item's child is dropped or the item is purged.
CREATE TABLE item_keys (
    tenant_id       uuid NOT NULL,
    idempotency_key text NOT NULL,
    item_id         uuid NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE INDEX item_keys_item ON item_keys (item_id);
INSERT INTO item_keys (tenant_id, idempotency_key, item_id)
SELECT tenant_id, idempotency_key, id FROM items WHERE idempotency_key IS NOT NULL;

ALTER TABLE items ENABLE ROW LEVEL SECURITY;
ALTER TABLE items FORCE ROW LEVEL SECURITY;
ALTER TABLE items_default ENABLE ROW LEVEL SECURITY;
ALTER TABLE items_default FORCE ROW LEVEL SECURITY;
ALTER TABLE item_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE item_keys FORCE ROW LEVEL SECURITY;

-- A key whose item is gone is free: the row that still names it is taken
-- over. Under READ COMMITTED the insert of the key waits for a concurrent
-- insert of the same key and then sees its outcome; under REPEATABLE READ
-- a key taken by a transaction the snapshot does not see fails the insert
-- with a serialization error, as the unique index on items did.
CREATE FUNCTION items_key_claim() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    v_owner uuid;
BEGIN
    INSERT INTO item_keys (tenant_id, idempotency_key, item_id)
    VALUES (NEW.tenant_id, NEW.idempotency_key, NEW.id)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    SELECT item_id INTO v_owner FROM item_keys
    WHERE tenant_id = NEW.tenant_id AND idempotency_key = NEW.idempotency_key;
    -- The same item again: a survivor moving to the default partition, or
    -- a repeated insert that the primary key then refuses.
    IF v_owner = NEW.id THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM items
               WHERE id = v_owner AND tenant_id = NEW.tenant_id
                 AND idempotency_key = NEW.idempotency_key) THEN
        RETURN NULL;
    END IF;
    UPDATE item_keys SET item_id = NEW.id
    WHERE tenant_id = NEW.tenant_id AND idempotency_key = NEW.idempotency_key
      AND item_id = v_owner;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    -- Another insert took the stale key over first.
    RETURN NULL;
END $$;

CREATE TRIGGER items_key_claim BEFORE INSERT ON items
    FOR EACH ROW WHEN (NEW.idempotency_key IS NOT NULL)
    EXECUTE FUNCTION items_key_claim();

-- Wake-ups and claim floors as 0025's, on the parent.
CREATE TRIGGER items_wake AFTER INSERT ON items
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION items_wake();

DO $do$
DECLARE
    v_rt  text;
    v_sys text;
    v_tenant constant text :=
        $q$tenant_id = nullif(current_setting('drover.tenant_id', true), '')::uuid$q$;
    v_def text;
BEGIN
    SELECT runtime_role, system_role INTO v_rt, v_sys FROM drover_roles();
    EXECUTE format('CREATE POLICY items_runtime ON items TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY items_system ON items TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON items TO %I, %I', v_rt, v_sys);
    -- Children are reached through the parent. The system role alone reads
    -- them by name: the default partition's row-by-row purge, and the
    -- survivors of a detached child.
    EXECUTE format('REVOKE ALL ON items_legacy FROM %I', v_rt);
    EXECUTE format('REVOKE ALL ON items_legacy FROM %I', v_sys);
    EXECUTE format('GRANT SELECT ON items_legacy TO %I', v_sys);
    EXECUTE format('DROP POLICY items_runtime ON items_legacy');
    EXECUTE format('CREATE POLICY items_system ON items_default TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, UPDATE, DELETE ON items_default TO %I', v_sys);

    EXECUTE format('CREATE POLICY item_keys_runtime ON item_keys TO %I USING (%s) WITH CHECK (%s)',
                   v_rt, v_tenant, v_tenant);
    EXECUTE format('CREATE POLICY item_keys_system ON item_keys TO %I USING (true) WITH CHECK (true)', v_sys);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON item_keys TO %I', v_rt);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON item_keys TO %I', v_sys);

    -- claim_items returned the old table's row type (now items_legacy's):
    -- made again, unchanged otherwise, to return the parent's.
    v_def := pg_get_functiondef('claim_items(text, text[], text, float8, bigint)'::regprocedure);
    v_def := regexp_replace(v_def, 'RETURNS SETOF \S*items_legacy', 'RETURNS SETOF items');
    DROP FUNCTION claim_items(text, text[], text, float8, bigint);
    EXECUTE v_def;
    REVOKE ALL ON FUNCTION claim_items(text, text[], text, float8, bigint) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION claim_items(text, text[], text, float8, bigint) TO %I', v_sys);

    -- Make the children covering [p_from, p_to), p_width each, starting at
    -- the last child's end when that is later than p_from. A window that
    -- already holds rows of the default partition (an id from a clock
    -- ahead) cannot be attached: it is skipped and the next one tried.
    -- Returns how many it made. The caller sets lock_timeout: a child is
    -- made under an exclusive lock on items, and waiting behind a long
    -- transaction must not stall every claim queued behind the wait.
    EXECUTE format($f$
CREATE FUNCTION items_children_make(p_from timestamptz, p_to timestamptz, p_width interval)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $body$
DECLARE
    v_lo    timestamptz;
    v_hi    timestamptz;
    v_last  timestamptz;
    v_made  integer := 0;
    v_name  text;
BEGIN
    IF p_width < interval '1 second' THEN
        RAISE EXCEPTION 'child width %% is below a second', p_width USING ERRCODE = '22023';
    END IF;
    SELECT max(hi) INTO v_last FROM items_children();
    v_lo := greatest(p_from, coalesce(v_last, p_from));
    WHILE v_lo < p_to LOOP
        v_hi := v_lo + p_width;
        v_name := 'items_c' || lpad(to_hex((extract(epoch FROM v_lo) * 1000)::bigint), 12, '0');
        BEGIN
            EXECUTE format('CREATE TABLE %%I PARTITION OF items FOR VALUES FROM (%%L) TO (%%L) WITH (
                fillfactor = 80, autovacuum_vacuum_scale_factor = 0.01,
                autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,
                autovacuum_vacuum_cost_delay = 1, vacuum_truncate = false)',
                v_name, items_time_id(v_lo), items_time_id(v_hi));
            PERFORM items_child_index_names(v_name);
            EXECUTE format('ALTER TABLE %%I ENABLE ROW LEVEL SECURITY', v_name);
            EXECUTE format('ALTER TABLE %%I FORCE ROW LEVEL SECURITY', v_name);
            EXECUTE format('CREATE POLICY items_system ON %%I TO %%I USING (true) WITH CHECK (true)', v_name, %L);
            EXECUTE format('GRANT SELECT ON %%I TO %%I', v_name, %L);
            v_made := v_made + 1;
        EXCEPTION WHEN check_violation THEN
            -- The default partition holds a row of this window.
            NULL;
        END;
        v_lo := v_hi;
    END LOOP;
    RETURN v_made;
END
$body$
$f$, v_sys, v_sys);
    REVOKE ALL ON FUNCTION items_children_make(timestamptz, timestamptz, interval) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION items_children_make(timestamptz, timestamptz, interval) TO %I', v_sys);

    -- Detach one child (p_drop false) or drop a detached one (p_drop true).
    -- Only a table this schema's items had or has as a range child is
    -- touched: never the default partition, never anything else.
    EXECUTE $f$
CREATE FUNCTION items_child_end(p_child text, p_drop boolean)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $body$
BEGIN
    IF p_child !~ '^items_(c[0-9a-f]{12}|legacy)$' THEN
        RAISE EXCEPTION 'not an items child: %', p_child USING ERRCODE = '22023';
    END IF;
    IF p_drop THEN
        IF EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(p_child)) THEN
            RAISE EXCEPTION 'items child % is still attached', p_child USING ERRCODE = '55000';
        END IF;
        EXECUTE format('DROP TABLE %I', p_child);
    ELSE
        EXECUTE format('ALTER TABLE items DETACH PARTITION %I', p_child);
    END IF;
END
$body$
$f$;
    REVOKE ALL ON FUNCTION items_child_end(text, boolean) FROM PUBLIC;
    EXECUTE format('GRANT EXECUTE ON FUNCTION items_children() TO %I', v_sys);
    EXECUTE format('GRANT EXECUTE ON FUNCTION items_child_end(text, boolean) TO %I', v_sys);
END
$do$;
